"""Faults a newcomer following the README can meet: ``reindex`` of an unknown collection,
and ``show`` counting indexed rows as the documents' children."""

from __future__ import annotations

import asyncio
import re

import pytest
from sqlalchemy import text

from parrot_parents.cli.main import main
from parrot_parents.stores.postgres.connections.engine import make_engine
from tests.conftest import EXAMPLES, Ingested, unique_table


async def _exists(dsn: str, table: str) -> bool:
    engine = await make_engine(dsn)
    try:
        async with engine.connect() as conn:
            found = (await conn.execute(text("SELECT to_regclass(:t)"), {"t": table})).scalar()
    finally:
        await engine.dispose()
    return found is not None


def test_reindex_of_an_unknown_collection_fails_and_creates_nothing(
    pg_dsn: str, capsys: pytest.CaptureFixture[str]
) -> None:
    table = unique_table("nosuch")
    assert main(["reindex", "--stale", "--collection", table, "--dsn", pg_dsn]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert not asyncio.run(_exists(pg_dsn, table))


def test_show_counts_the_documents_own_children_not_indexed_rows(
    pg_dsn: str, example_corpus: Ingested, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "indexed row(s)" in example_corpus.output  # the default strategy
    common = ["--collection", example_corpus.collection, "--dsn", pg_dsn]
    assert main(["show", "employee-handbook.md", *common]) == 0
    tree = capsys.readouterr().out
    shown = int(re.search(r"4\. Pay and Payroll: 1 parent, (\d+) children", tree).group(1))
    plain = ["--collection", unique_table("plain"), "--dsn", pg_dsn]
    assert main(["ingest", str(EXAMPLES), *plain, "--strategy", "plain"]) == 0
    capsys.readouterr()
    assert main(["show", "employee-handbook.md", *plain]) == 0
    assert f"4. Pay and Payroll: 1 parent, {shown} children" in capsys.readouterr().out


def test_help_names_a_bot_setting_only_where_a_bot_gives_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # eval takes no bot, and a bot row holds no filter.
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert "bot's setting" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["ask", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "(default: the bot's setting, else 10, or 20 with a budget)" in out
    filter_help = out[out.index("--filter JSON metadata filter") :]
    assert filter_help[: filter_help.index("--rerank-candidates")].endswith("(default: none) ")
