"""A fast CLI: ``ask --server`` reuses a running ``serve``, the model load has its own
timing, and ``show`` / ``--store milvus:`` never wait for the model.

"Never loads the model" is checked on ``sys.modules`` of a fresh interpreter (torch is
imported only to load it), not with a clock.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from parrot_parents.bots.repository import BotRepository
from parrot_parents.cli.main import main
from tests.conftest import REPO_ROOT, Ingested, unique_table
from tests.migrations.support import (  # noqa: F401
    COLLECTION,
    database,
    in_thread,
    template_dsn_fixture,
)

MODEL_STACK = ("torch", "transformers", "sentence_transformers")

PROBE = """
import json, sys
for blocked in {blocked!r}:
    sys.modules[blocked] = None  # as if not installed
from parrot_parents.cli.main import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
loaded = [m for m in {watched!r} if m in sys.modules and sys.modules[m] is not None]
print(json.dumps({{"code": code, "loaded": loaded}}), file=sys.stderr)
"""


def probe(*argv: str, blocked: tuple[str, ...] = (), env: dict[str, str] | None = None) -> Any:
    """Run the CLI in a fresh interpreter: its exit code, stdout, stderr and model imports."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(blocked=blocked, watched=MODEL_STACK), *argv],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO_ROOT,
        env={**os.environ, **(env or {})},
    )
    *err, last = proc.stderr.strip().splitlines()
    result = json.loads(last)
    return result["code"], proc.stdout, "\n".join(err), result["loaded"]


@pytest.fixture(scope="module")
def served_dsn(pg_dsn: str, template_dsn: str) -> Iterator[str]:
    """A copy of the template with the bots ``hr`` and ``hr_parents`` over the ``handbook``
    collection, for the module's server (the tests only read it)."""

    async def bots(dsn: str) -> None:
        async with BotRepository(dsn) as repo:
            await repo.create({"name": "hr", "collection": COLLECTION})
            await repo.create({"name": "hr_parents", "collection": COLLECTION})

    with database(pg_dsn, template_dsn) as dsn:
        in_thread(asyncio.run, bots(dsn))
        yield dsn


@pytest.fixture(scope="module")
def server(served_dsn: str) -> Iterator[str]:
    """A real ``parrot-parents serve`` on a free port over :func:`served_dsn`, started once
    for the module; its base URL."""
    env = {**os.environ, "PARROT_PARENTS_DSN": served_dsn, "HF_HUB_OFFLINE": "1"}
    env.pop("PARROT_PARENTS_TOKEN", None)
    env.pop("PARROT_PARENTS_LLM_BASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "parrot_parents", "serve", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        match = re.search(r"serving 2 bot\(s\) on (http://[\d.]+:\d+)", line)
        assert match, line + proc.stderr.read()  # type: ignore[union-attr]
        yield match.group(1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def test_ask_server_answers_as_a_local_ask_without_loading_the_model(
    server: str, served_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    question = "How many days of annual leave do I get?"
    flags = ["--collection", COLLECTION, "--limit", "3", "--no-expand", "--json"]
    code, out, err, loaded = probe("ask", question, *flags, "--server", server, "--bot", "hr")
    assert (code, loaded) == (0, []), err
    remote = json.loads(out)
    assert main(["ask", question, *flags, "--dsn", served_dsn]) == 0
    local = json.loads(capsys.readouterr().out)

    def spans(answer: dict[str, Any]) -> list[tuple[Any, ...]]:
        keys = ("document_id", "start_index", "end_index", "kind")
        return [tuple(p[k] for k in keys) for p in answer["passages"]]

    assert spans(remote) == spans(local) and len(spans(local)) == 3
    assert remote["context"] == local["context"]
    assert remote["meta"]["timings_ms"]["request"] > 0
    assert "model_load" not in remote["meta"]["timings_ms"]
    assert "model_load" in local["meta"]["timings_ms"]


def test_ask_server_picks_the_collection_s_one_bot_or_says_which(server: str) -> None:
    code, _, err, loaded = probe("ask", "pay day?", "--server", server, "--collection", "x")
    assert (code, loaded) == (2, [])
    assert "no bot on" in err and "serves collection 'x'; its bots: hr (handbook)" in err
    code, _, err, _ = probe("ask", "pay day?", "--server", server, "--collection", COLLECTION)
    assert code == 2 and "several bots" in err and "hr, hr_parents" in err
    code, _, err, _ = probe("ask", "pay day?", "--server", server, "--bot", "nobody")
    assert code == 2 and "the server answered 404" in err
    # A collection given with a bot is the bot's, or the question is not asked.
    code, _, err, _ = probe(
        "ask", "pay day?", "--server", server, "--bot", "hr", "--collection", "other"
    )
    assert code == 2 and f"bot 'hr' on {server} serves collection '{COLLECTION}'" in err
    assert "not 'other'" in err
    # The server checks the options, as for any client.
    code, _, err, _ = probe("ask", "q", "--server", server, "--bot", "hr", "--limit", "0")
    assert code == 2 and "the server answered 400" in err and "limit" in err


def test_ask_server_from_the_environment_with_plain_output(server: str) -> None:
    code, out, err, loaded = probe(
        "ask", "pay day?", "--bot", "hr", "--limit", "1", env={"PARROT_PARENTS_SERVER": server}
    )
    assert (code, loaded) == (0, []), err
    assert out.startswith("[1] ") and "-- 1 passage(s)" in out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--dsn", "postgresql://x@y/z"], "--dsn cannot be used with --server"),
        (["--model", "m"], "--model cannot be used with --server"),
        (["--server", "ftp://host"], "--server must be an http:// or https:// URL"),
        (["--server", "http://127.0.0.1:9"], "cannot reach the server at http://127.0.0.1:9"),
    ],
)
def test_ask_server_refusals_load_nothing(flags: list[str], message: str) -> None:
    if flags[0] != "--server":
        flags = ["--server", "http://127.0.0.1:9", *flags]
    code, _, err, loaded = probe("ask", "q", *flags)
    assert (code, loaded) == (2, []) and message in err, err


def test_bot_and_token_go_with_server(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ask", "q", "--bot", "hr"]) == 2
    assert "--bot and --token go with --server" in capsys.readouterr().err


def test_ask_reports_the_model_load_apart_from_the_search(served_dsn: str) -> None:
    code, out, err, _ = probe(
        "ask", "pay day?", "--collection", COLLECTION, "--dsn", served_dsn, "--json"
    )
    assert code == 0, err
    timings = json.loads(out)["meta"]["timings_ms"]
    assert timings["model_load"] > 0  # a fresh process loads it, outside "search"
    assert set(timings) >= {"search", "total", "model_load"}


def test_show_never_loads_the_model(pg_dsn: str, example_corpus: Ingested) -> None:
    common = ["--collection", example_corpus.collection, "--dsn", pg_dsn]
    code, out, err, loaded = probe("show", "employee-handbook.md", *common)
    assert (code, loaded) == (0, []), err
    assert out.startswith("employee-handbook.md\n") and "Pay and Payroll" in out
    code, out, _, loaded = probe("show", "no-such.md", *common)
    assert (code, loaded) == (1, []) and "no document 'no-such.md'" in out
    code, _, err, loaded = probe("show", "a.md", "--collection", unique_table(), "--dsn", pg_dsn)
    assert (code, loaded) == (2, []) and "does not exist" in err


@pytest.mark.parametrize("command", ["ask", "ingest"])
def test_milvus_without_pymilvus_fails_before_the_model(command: str) -> None:
    target = "q" if command == "ask" else str(REPO_ROOT / "examples" / "corpus")
    code, _, err, loaded = probe(
        command, target, "--store", "milvus:./never.db", blocked=("pymilvus",)
    )
    assert (code, loaded) == (2, [])
    assert "the Milvus store needs pymilvus (pip install 'parrot-parents[milvus]')" in err


def test_an_unknown_collection_fails_before_the_bot_is_imported(pg_dsn: str) -> None:
    """The collection is checked first: neither the model nor the bot, the query pipeline
    and the HTTP client they bring are imported (over a second of imports here)."""
    watched = (
        *MODEL_STACK,
        "parrot_parents.bots.chatbot",
        "parrot_parents.retrieval.pipeline",
        "aiohttp",
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE.format(blocked=(), watched=watched),
            *("ask", "pay day?", "--collection", "no_such_collection_here", "--dsn", pg_dsn),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=REPO_ROOT,
    )
    *err, last = proc.stderr.strip().splitlines()
    result = json.loads(last)
    assert (result["code"], result["loaded"]) == (2, []), proc.stderr
    assert "collection 'no_such_collection_here' does not exist" in "\n".join(err)
