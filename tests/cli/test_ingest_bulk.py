"""``ingest`` defers the vector index into a new collection, and only there."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from parrot_parents.cli.main import main
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.sync import run_sync
from tests.conftest import REPO_ROOT, unique_table

EXAMPLES = REPO_ROOT / "examples" / "corpus"


def _drop_index_and_count(pg_dsn: str, table: str, embeddings) -> int:
    async def go() -> int:
        async with PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings) as store:
            async with store.engine.begin() as conn:
                await conn.execute(text(f'DROP INDEX "{table}_embedding_hnsw"'))
            return await store.count()

    return run_sync(go())


def test_a_new_collection_is_bulk_loaded_and_a_filled_one_is_not(
    pg_dsn: str, embeddings, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = unique_table("bulk")
    base = ["--collection", table, "--dsn", pg_dsn]
    assert main(["ingest", str(EXAMPLES), *base]) == 0
    assert "built the vector index in" in capsys.readouterr().out
    (tmp_path / "new.md").write_text("# New\n\nA new file about parrots and seeds.\n")
    assert main(["ingest", str(tmp_path), *base]) == 0
    assert "built the vector index" not in capsys.readouterr().out
    # A collection left without its index (a bulk build that failed) is rebuilt.
    assert _drop_index_and_count(pg_dsn, table, embeddings) > 0
    (tmp_path / "other.md").write_text("# Other\n\nAnother file.\n")
    assert main(["ingest", str(tmp_path), *base]) == 0
    assert "built the vector index in" in capsys.readouterr().out
    other = ["--collection", unique_table("nobulk"), "--dsn", pg_dsn]
    assert main(["ingest", str(tmp_path), *other, "--no-bulk"]) == 0
    assert "built the vector index" not in capsys.readouterr().out
