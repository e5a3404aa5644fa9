"""``parrot-parents collections|documents|delete|drop``, and a closed stdout pipe."""

from __future__ import annotations

import asyncio
import builtins
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from parrot_parents.cli.main import BROKEN_PIPE_EXIT, main
from tests.migrations.support import (  # noqa: F401
    _asyncpg_dsn,
    empty_dsn_fixture,
    in_thread,
)

PAY = "# Pay\n\nSalaries are paid on the 25th of each month by bank transfer.\n"
LEAVE = "# Leave\n\nEvery employee has 25 days of paid leave a year.\n"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def _sql(dsn: str, sql: str) -> list[Any]:
    async def fetch() -> list[Any]:
        conn = await asyncpg.connect(**_asyncpg_dsn(dsn))
        try:
            return list(await conn.fetch(sql))
        finally:
            await conn.close()

    return in_thread(asyncio.run, fetch())


@pytest.fixture
def kb(empty_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """``empty_dsn`` migrated (bots table, alembic_version) with collection ``kb`` of two
    files, ``pay.md`` and ``leave.md``."""
    from parrot_parents import migrations

    in_thread(migrations.upgrade, empty_dsn)
    (tmp_path / "pay.md").write_text(PAY)
    (tmp_path / "leave.md").write_text(LEAVE)
    code, _, err = run(capsys, "ingest", str(tmp_path), "--collection", "kb", "--dsn", empty_dsn)
    assert code == 0, err
    return empty_dsn


def test_collections_lists_only_collections_with_counts(
    kb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "collections", "--dsn", kb, "--json")
    assert code == 0
    (found,) = json.loads(out)  # not the bots, documents, lexicon or alembic tables
    assert found["name"] == "kb" and found["schema"] == "public"
    assert (found["documents"], found["parents"]) == (2, 2)
    assert found["children"] >= 2
    # The default ingestion strategy writes one context row per child.
    assert found["indexed"] == found["children"]
    assert found["strategies"] == ["contextual:context=extractive"]
    assert found["dimension"] == 384
    # The model the collection records (parrot_parents.stores.postgres.collections.model_contract).
    assert found["embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert found["reembedding"] is False
    assert (found["lexical_backend"], found["text_search_config"]) == ("sql", "english")

    code, out, _ = run(capsys, "collections", "--dsn", kb)
    header, row = out.splitlines()
    assert header.split() == [
        "NAME",
        "DOCUMENTS",
        "PARENTS",
        "CHILDREN",
        "DIM",
        "MODEL",
        "STRATEGY",
        "LEXICAL",
        "PARTITION",
        "FILTER_KEYS",
    ]
    assert row.split()[:6] == [
        "kb",
        "2",
        "2",
        str(found["children"]),
        "384",
        f"sentence-transformers/all-MiniLM-L6-v2@{found['model_fingerprint']}",
    ]
    assert row.endswith("contextual:context=extractive  sql (english)  -          -")
    assert found["partition_key"] is None


def test_documents_delete_and_drop(kb: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "documents", "kb", "--dsn", kb, "--json")
    assert code == 0
    docs = {Path(d["source"]).name: d for d in json.loads(out)}
    assert set(docs) == {"pay.md", "leave.md"}
    assert docs["pay.md"]["characters"] == len(PAY)
    assert docs["pay.md"]["parents"] == 1 and docs["pay.md"]["children"] >= 1
    assert docs["pay.md"]["ingested_at"] is not None
    pay, leave = docs["pay.md"]["document_id"], docs["leave.md"]["document_id"]

    code, out, _ = run(capsys, "documents", "kb", "--dsn", kb)
    assert out.splitlines()[0].split() == [
        "DOCUMENT_ID",
        "SOURCE",
        "CHARACTERS",
        "PARENTS",
        "CHILDREN",
        "INGESTED_AT",
    ]

    code, out, err = run(capsys, "delete", "kb", pay, "no-such-id", "--dsn", kb)
    assert code == 1
    assert out.startswith(f"deleted {pay!r} from 'kb' (")
    assert err == "no document 'no-such-id' in 'kb'\n"
    _, out, _ = run(capsys, "documents", "kb", "--dsn", kb, "--json")
    assert [d["document_id"] for d in json.loads(out)] == [leave]
    # Rows, documents table and BM25 statistics all lost the document.
    children = docs["leave.md"]["children"]
    assert _sql(kb, "SELECT count(*) FROM kb WHERE embedding IS NOT NULL")[0][0] == children
    assert _sql(kb, "SELECT count(*) FROM kb_documents")[0][0] == 1
    assert _sql(kb, "SELECT n FROM kb_lexstats")[0][0] == children

    # Not a terminal (pytest's stdin): refused without --yes, nothing dropped.
    code, _, err = run(capsys, "drop", "kb", "--dsn", kb)
    assert code == 2 and "refusing to drop 'kb' without confirmation" in err
    code, out, _ = run(capsys, "drop", "kb", "--yes", "--dsn", kb)
    assert (code, out) == (0, "dropped collection 'kb'\n")
    _, out, _ = run(capsys, "collections", "--dsn", kb, "--json")
    assert json.loads(out) == []
    tables = {r[0] for r in _sql(kb, "SELECT tablename FROM pg_tables WHERE schemaname='public'")}
    assert not {"kb", "kb_documents", "kb_lexicon", "kb_lexstats"} & tables


def test_drop_asks_on_a_terminal(
    kb: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    answers = iter(["n", "yes"])
    prompts: list[str] = []

    def answer(prompt: str = "") -> str:
        prompts.append(prompt)
        return next(answers)

    monkeypatch.setattr(builtins, "input", answer)
    code, _, err = run(capsys, "drop", "kb", "--dsn", kb)
    assert (code, err) == (1, "not dropped\n")
    assert prompts == ["drop collection 'kb' and its 2 document(s)? This cannot be undone [y/N] "]
    code, out, _ = run(capsys, "drop", "kb", "--dsn", kb)
    assert (code, out) == (0, "dropped collection 'kb'\n")


def test_unknown_collection_is_a_clear_error(
    empty_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["documents", "nope"], ["delete", "nope", "x"], ["drop", "nope", "--yes"]):
        code, _, err = run(capsys, *argv, "--dsn", empty_dsn)
        assert code == 2
        assert err.startswith("parrot-parents: error: collection 'nope' does not exist"), err


def _closed_early(*argv: str) -> subprocess.CompletedProcess[bytes]:
    """Run the CLI with its stdout a pipe whose reader has gone (``... | head``)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [sys.executable, "-m", "parrot_parents", *argv],
            stdout=write,
            stderr=subprocess.PIPE,
            timeout=120,
        )
    finally:
        os.close(write)


def test_a_closed_stdout_pipe_ends_quietly(kb: str) -> None:
    for argv in (["collections", "--dsn", kb],):
        done = _closed_early(*argv)
        assert done.stderr == b"", (argv, done.stderr.decode())
        assert done.returncode == BROKEN_PIPE_EXIT, argv
    # argparse's own output (help, version) already ignores a closed pipe.
    assert _closed_early("--help").stderr == b""


@pytest.mark.parametrize(
    ("key", "cell"),
    [
        (None, "-"),
        ("tenant", "tenant"),
        ("région", "région"),
        (" ", '" "'),
        ("", '""'),
        ("a b", '"a b"'),
        ("-", '"-"'),
        ("tab\there", '"tab\\there"'),
        ('"-"', '"\\"-\\""'),
        ('"q"', '"\\"q\\""'),
        ("a\u00a0b", '"a\\u00a0b"'),
        ("\u200b", '"\\u200b"'),
        ("a|b", "a|b"),
    ],
)
def test_a_partition_key_reads_back_from_the_table(key: str | None, cell: str) -> None:
    from parrot_parents.cli.collections import format_table, key_cell

    line = format_table(("NAME", "PARTITION"), [("docs", key_cell(key))]).splitlines()[1]
    assert line.split("  ", 1)[1] == cell
    if key not in (None, "-") and cell.startswith('"'):
        assert json.loads(cell) == key  # a quoted cell reads back as the key
