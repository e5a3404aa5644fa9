"""``parrot-parents serve`` as a real process: token from the environment, bots from rows."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from typing import Any

import pytest

from parrot_parents.bots.repository import BotRepository
from tests.migrations.support import empty_dsn_fixture  # noqa: F401


def _get(url: str, token: str | None = None, body: dict[str, Any] | None = None) -> Any:
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode())
    if body is not None:
        req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


async def test_serve_with_a_token_from_the_environment(repo: BotRepository, bots_dsn: str) -> None:
    import asyncio

    env = {
        **os.environ,
        "PARROT_PARENTS_TOKEN": "from-env",
        "PARROT_PARENTS_DSN": bots_dsn,
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("PARROT_PARENTS_LLM_BASE_URL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "parrot_parents", "serve", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = await asyncio.to_thread(proc.stdout.readline)
        match = re.search(
            r"serving 2 bot\(s\) on (http://[\d.]+:\d+) \(auth: bearer token; "
            r"ask: off, no LLM configured\)",
            line,
        )
        assert match, line
        base = match.group(1)
        status, health = await asyncio.to_thread(_get, f"{base}/health")
        assert (status, health) == (200, {"status": "ok"})
        status, health = await asyncio.to_thread(_get, f"{base}/api/v1/health", "from-env")
        assert status == 200 and health["failed_bots"] == ["broken"]
        status, body = await asyncio.to_thread(_get, f"{base}/api/v1/bots")
        assert status == 401
        status, body = await asyncio.to_thread(
            _get, f"{base}/api/v1/bots/hr/context", "from-env", {"question": "pay day?"}
        )
        assert status == 200 and body["passages"]
        status, body = await asyncio.to_thread(
            _get, f"{base}/api/v1/bots/hr/ask", "from-env", {"question": "pay day?"}
        )
        assert status == 501
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.to_thread(proc.communicate, timeout=30)
    assert proc.returncode == 0, err
    assert "bot 'broken' not loaded: collection: no collection named 'no_such_table'" in err


async def _start(
    env: dict[str, str], flags: tuple[str, ...] | list[str] = ()
) -> tuple[subprocess.Popen[str], str]:
    """A ``serve --port 0`` process and its base URL (from its first line of output)."""
    import asyncio

    proc = subprocess.Popen(
        [sys.executable, "-m", "parrot_parents", "serve", "--port", "0", *flags],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = await asyncio.to_thread(proc.stdout.readline)  # type: ignore[union-attr]
    match = re.search(r"serving 0 bot\(s\) on (http://[\d.]+:\d+)", line)
    if not match:
        proc.kill()
        _, err = proc.communicate(timeout=30)
        raise AssertionError(f"serve did not start: {line!r}\n{err[-3000:]}")
    return proc, match.group(1)


async def test_two_servers_starting_on_a_fresh_database_migrate_it_once(empty_dsn: str) -> None:
    """A database that was never migrated: both servers start at once, one applies every
    revision (and logs them in one line of its own, without alembic's step-by-step log),
    the other finds the schema up to date; both serve. The second serves a public address
    without a token: that needs the explicit flag, and it says what is open."""
    import asyncio

    from parrot_parents import migrations

    env = {
        **os.environ,
        "PARROT_PARENTS_TOKEN": "t",
        "PARROT_PARENTS_DSN": empty_dsn,
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("PARROT_PARENTS_LLM_BASE_URL", None)
    public_env = {k: v for k, v in env.items() if k != "PARROT_PARENTS_TOKEN"}
    public = ["--host", "0.0.0.0", "--insecure-no-token-on-public-interface"]
    started = await asyncio.gather(_start(env), _start(public_env, public), return_exceptions=True)
    procs = [s[0] for s in started if not isinstance(s, BaseException)]
    errs = []
    try:
        failed = [s for s in started if isinstance(s, BaseException)]
        assert not failed, failed
        for (_, base), token in zip(started, ("t", None), strict=True):  # type: ignore[misc]
            local = "http://127.0.0.1:" + base.rsplit(":", 1)[1]
            assert await asyncio.to_thread(_get, f"{local}/health") == (200, {"status": "ok"})
            status, body = await asyncio.to_thread(_get, f"{local}/api/v1/bots", token)
            assert (status, body["bots"]) == (200, [])
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            _, err = await asyncio.to_thread(proc.communicate, timeout=30)
            errs.append(err)
    assert [p.returncode for p in procs] == [0, 0], errs
    revisions = [r["revision"] for r in migrations.history()]
    applied = [e for e in errs if f"applied {len(revisions)} migration(s): {revisions[0]} (" in e]
    assert len(applied) == 1, errs
    assert all(rev in applied[0] for rev in revisions)
    head = migrations.heads()[0]
    others = [e for e in errs if e is not applied[0]]
    assert f"schema up to date (revision {head}), no migration applied" in others[0], errs
    assert not [e for e in errs if "alembic" in e], errs
    assert (
        "WARNING parrot_parents.cli.serve: serving 0.0.0.0 without a token "
        "(--insecure-no-token-on-public-interface): every document's text" in errs[1]
    ), errs[1]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--port", "99999"], "argument --port: must be a port number from 0 to 65535"),
        (["--port", "-1"], "argument --port: must be a port number from 0 to 65535"),
        (["--body-timeout", "-5"], "--body-timeout must be a number > 0, got -5.0"),
        (["--max-body-bytes", "0"], "--max-body-bytes must be an int >= 1, got 0"),
        (["--token", " "], "--token (or $PARROT_PARENTS_TOKEN) must not be empty"),
        # An address the network reaches, and no token: the documents would be open.
        (
            ["--host", "0.0.0.0"],
            "refusing to serve --host 0.0.0.0 without a token: every document's text",
        ),
        (["--host", "::"], "set --token (or $PARROT_PARENTS_TOKEN), bind 127.0.0.1, or pass"),
    ],
)
def test_a_bad_setting_is_refused_before_the_database_is_reached(
    flags: list[str], message: str
) -> None:
    # A database nobody listens on: reaching it would be another error, seconds later.
    env = {**os.environ, "PARROT_PARENTS_DSN": "postgresql://nobody@127.0.0.1:1/none"}
    env.pop("PARROT_PARENTS_TOKEN", None)
    proc = subprocess.run(
        [sys.executable, "-m", "parrot_parents", "serve", *flags],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "127.0.0.1:1" not in proc.stderr
    if not message.startswith("argument"):  # argparse's own errors come with the usage
        assert len(proc.stderr.splitlines()) == 1, proc.stderr


def test_a_port_in_use_is_named_in_one_line(
    empty_dsn: str, embeddings: Any, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    """In this process, where the model is already loaded (``embeddings``): the failure
    comes after the model load, which a fresh process would pay for again. A real
    process's exit code and one-line errors are checked by the test above."""
    import logging
    import socket

    from parrot_parents.cli.main import main

    monkeypatch.setenv("PARROT_PARENTS_DSN", empty_dsn)
    monkeypatch.delenv("PARROT_PARENTS_LLM_BASE_URL", raising=False)
    # serve quiets these loggers for the process; they are put back for the next tests.
    levels = {name: logging.getLogger(name).level for name in ("alembic", "pgserver")}
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        code = main(["serve", "--port", str(port)])
    finally:
        taken.close()
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"parrot-parents: error: cannot listen on 127.0.0.1:{port}: " in err
    assert "choose another --port" in err and "Traceback" not in err
