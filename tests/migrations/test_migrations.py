"""The alembic migrations, up and down, on real databases."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import subprocess
import sys
from typing import Any

import pytest
import sqlalchemy as sa
from langchain_core.documents import Document
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from parrot_parents import migrations
from parrot_parents.bots.repository import bots_table
from parrot_parents.bots.settings import validate_bot
from parrot_parents.errors import BotConfigError, ConfigurationError
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.backfill import progress_table
from parrot_parents.stores.postgres.connections.dsn import to_async_dsn


async def _query(dsn: str, fn: Any) -> Any:
    engine = create_async_engine(to_async_dsn(dsn), poolclass=NullPool)
    try:
        async with engine.begin() as conn:
            return await conn.run_sync(fn)
    finally:
        await engine.dispose()


def _tables(conn: sa.Connection) -> set[str]:
    return set(sa.inspect(conn).get_table_names())


def _describe(name: str) -> Any:
    def read(conn: sa.Connection) -> dict[str, Any]:
        insp = sa.inspect(conn)
        cols = {c["name"]: (str(c["type"]), c["nullable"]) for c in insp.get_columns(name)}
        storage = dict(
            conn.execute(
                sa.text(
                    "SELECT attname, attstorage::text FROM pg_attribute WHERE attrelid ="
                    " to_regclass(:t) AND attnum > 0 AND NOT attisdropped"
                ),
                {"t": name},
            ).all()
        )
        rows = conn.execute(
            sa.text("SELECT indexdef FROM pg_indexes WHERE tablename = :t"), {"t": name}
        ).scalars()
        # Index names carry the table name; compare the definitions without it.
        indexes = sorted(r.replace(name, "T") for r in rows)
        return {"columns": cols, "indexes": indexes, "storage": storage}

    return read


async def test_upgrade_creates_the_schema_and_the_named_collections(empty_dsn: str) -> None:
    assert await asyncio.to_thread(migrations.current, empty_dsn) is None
    created = await asyncio.to_thread(migrations.upgrade, empty_dsn, collections=["docs"])
    assert created == ["docs"]
    assert await asyncio.to_thread(migrations.current, empty_dsn) == migrations.heads()[0]
    tables = await _query(empty_dsn, _tables)
    assert {"bots", "docs", "parrot_parents_backfill", migrations.VERSION_TABLE} <= tables


async def test_collection_from_migration_matches_the_store_schema(
    empty_dsn: str, embeddings: Any
) -> None:
    await asyncio.to_thread(migrations.upgrade, empty_dsn, collections=["by_migration"])
    async with PgVectorStore(dsn=empty_dsn, table="by_store", embedding=embeddings):
        pass
    migrated = await _query(empty_dsn, _describe("by_migration"))
    stored = await _query(empty_dsn, _describe("by_store"))
    assert migrated == stored
    assert migrated["columns"]["embedding"][0] == "VECTOR(384)"


async def test_a_store_opens_a_collection_created_by_the_migration(
    empty_dsn: str, embeddings: Any
) -> None:
    await asyncio.to_thread(migrations.upgrade, empty_dsn, collections=["docs"])
    async with PgVectorStore(dsn=empty_dsn, table="docs", embedding=embeddings) as store:
        await store.add_documents([])
        assert await store.count() == 0


async def test_upgrade_gives_an_existing_collection_the_row_layout(
    empty_dsn: str, embeddings: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async with PgVectorStore(dsn=empty_dsn, table="older", embedding=embeddings) as store:
        await store.add_documents([Document(page_content="kept")])
    await _query(
        empty_dsn,
        lambda conn: conn.execute(
            sa.text("ALTER TABLE older ALTER COLUMN embedding SET STORAGE EXTERNAL")
        ),
    )
    assert (await _query(empty_dsn, _describe("older")))["storage"]["embedding"] == "e"
    with caplog.at_level("WARNING"):
        await asyncio.to_thread(migrations.upgrade, empty_dsn, collections=["older"])
    assert "VACUUM FULL" in caplog.text and "older" in caplog.text
    storage = (await _query(empty_dsn, _describe("older")))["storage"]
    assert [storage[c] for c in ("embedding", "cmetadata", "lexical")] == ["m", "m", "m"]
    async with PgVectorStore(dsn=empty_dsn, table="older", embedding=embeddings) as store:
        assert await store.count() == 1


async def test_bots_and_progress_tables_match_the_code_that_uses_them(empty_dsn: str) -> None:
    await asyncio.to_thread(migrations.upgrade, empty_dsn)

    def columns(name: str) -> Any:
        return lambda conn: {c["name"] for c in sa.inspect(conn).get_columns(name)}

    assert await _query(empty_dsn, columns("bots")) == set(bots_table().c.keys())
    assert await _query(empty_dsn, columns("parrot_parents_backfill")) == set(
        progress_table().c.keys()
    )


async def test_downgrade_to_base_drops_what_the_upgrade_created(empty_dsn: str) -> None:
    await asyncio.to_thread(migrations.upgrade, empty_dsn, collections=["docs", "kept"])
    await asyncio.to_thread(migrations.downgrade, empty_dsn, "base", collections=["docs"])
    assert await asyncio.to_thread(migrations.current, empty_dsn) is None
    tables = await _query(empty_dsn, _tables)
    assert "bots" not in tables
    assert "parrot_parents_backfill" not in tables
    assert "docs" not in tables
    # A downgrade never drops a collection it was not told about.
    assert "kept" in tables

    def functions(conn: sa.Connection) -> list[str]:
        sql = "SELECT proname FROM pg_proc WHERE proname = 'parrot_parents_touch_updated_at'"
        return list(conn.execute(sa.text(sql)).scalars())

    assert await _query(empty_dsn, functions) == []


async def test_each_revision_goes_down_and_up_again(empty_dsn: str) -> None:
    revs = [r["revision"] for r in migrations.history()]
    await asyncio.to_thread(migrations.upgrade, empty_dsn)
    for expected in reversed([None, *revs[:-1]]):
        await asyncio.to_thread(migrations.downgrade, empty_dsn, "-1")
        assert await asyncio.to_thread(migrations.current, empty_dsn) == expected
    for rev in revs:
        await asyncio.to_thread(migrations.upgrade, empty_dsn, rev)
        assert await asyncio.to_thread(migrations.current, empty_dsn) == rev


async def test_upgrade_at_head_still_creates_new_collections(empty_dsn: str) -> None:
    await asyncio.to_thread(migrations.upgrade, empty_dsn)
    assert await asyncio.to_thread(migrations.upgrade, empty_dsn, collections=["later"]) == [
        "later"
    ]
    assert await asyncio.to_thread(migrations.upgrade, empty_dsn, collections=["later"]) == []


def test_concurrent_upgrades_in_threads_serialise(empty_dsn: str) -> None:
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(migrations.upgrade, empty_dsn) for _ in range(2)]
        results = [f.result() for f in futures]
    assert results == [[], []]
    assert migrations.current(empty_dsn) == migrations.heads()[0]


def test_concurrent_upgrades_in_processes_serialise(empty_dsn: str) -> None:
    code = "import sys; from parrot_parents import migrations; migrations.upgrade(sys.argv[1])"
    procs = [
        subprocess.Popen([sys.executable, "-c", code, empty_dsn], stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err.decode()
    assert migrations.current(empty_dsn) == migrations.heads()[0]


@pytest.mark.parametrize(
    ("bad", "constraint"),
    [
        ({"name": "no spaces"}, "bots_name_format"),
        ({"collection": "x;drop"}, "bots_collection_identifier"),
        ({"expansion_mode": "window:0"}, "bots_expansion_mode_format"),
        ({"expansion_mode": "auto_merge:1.5"}, "bots_expansion_mode_format"),
        ({"context_search_limit": 0}, "bots_context_search_limit_range"),
        ({"context_search_limit": 101}, "bots_context_search_limit_range"),
        ({"context_budget": 0}, "bots_context_budget_range"),
        ({"reranker_config": [1, 2]}, "bots_reranker_config_object"),
        ({"reranker_config": {"model": "x"}}, "bots_reranker_config_object"),
        ({"parent_searcher_config": "in_table"}, "bots_parent_searcher_config_object"),
        (
            {"expand_to_parent": True, "parent_searcher_config": None},
            "bots_expansion_needs_searcher",
        ),
        ({"description": "x" * 2001}, "bots_description_length"),
    ],
)
async def test_check_constraints_refuse_rows_written_with_plain_sql(
    bots_dsn: str, bad: dict[str, Any], constraint: str
) -> None:
    row = {"name": "ok", "collection": "handbook", **bad}
    cols = ", ".join(row)
    params = ", ".join(f"CAST(:{k} AS jsonb)" if k.endswith("_config") else f":{k}" for k in row)
    values = {
        k: json.dumps(v) if k.endswith("_config") and v is not None else v for k, v in row.items()
    }

    def insert(conn: sa.Connection) -> None:
        conn.execute(sa.text(f"INSERT INTO bots ({cols}) VALUES ({params})"), values)

    with pytest.raises(sa.exc.IntegrityError, match=constraint):
        await _query(bots_dsn, insert)
    # The Python validation refuses the same row.
    with pytest.raises(BotConfigError):
        validate_bot(row)


@pytest.mark.parametrize(
    "mode", ["parent", "auto_merge:1", "auto_merge:0.25", "auto_merge:.5", "window:1", "window:12"]
)
async def test_the_database_accepts_every_mode_python_accepts(bots_dsn: str, mode: str) -> None:
    validate_bot({"name": "m", "collection": "handbook", "expansion_mode": mode})

    def insert(conn: sa.Connection) -> None:
        conn.execute(
            sa.text("INSERT INTO bots (name, collection, expansion_mode) VALUES ('m', 'c', :m)"),
            {"m": mode},
        )

    await _query(bots_dsn, insert)


async def test_updated_at_moves_on_every_update(bots_dsn: str) -> None:
    def run(conn: sa.Connection) -> tuple[Any, Any, Any]:
        conn.execute(sa.text("INSERT INTO bots (name, collection) VALUES ('t', 'handbook')"))
        created, before = conn.execute(
            sa.text("SELECT created_at, updated_at FROM bots WHERE name = 't'")
        ).one()
        conn.execute(sa.text("UPDATE bots SET expand_to_parent = true WHERE name = 't'"))
        after = conn.execute(sa.text("SELECT updated_at FROM bots WHERE name = 't'")).scalar()
        return created, before, after

    created, before, after = await _query(bots_dsn, run)
    assert created == before
    assert after > before


def test_config_rejects_bad_collection_names() -> None:
    with pytest.raises(ConfigurationError, match="invalid collection name"):
        migrations.alembic_config(collections=["bad name"])
    with pytest.raises(ConfigurationError, match=r"dimension must be in 1..16000"):
        migrations.alembic_config(dimension=0)


async def test_0005_keeps_stored_limits_and_lets_new_rows_follow_the_default(
    empty_dsn: str,
) -> None:
    await asyncio.to_thread(migrations.upgrade, empty_dsn, "0004")

    def insert(conn: sa.Connection) -> None:
        conn.execute(sa.text("INSERT INTO bots (name, collection) VALUES ('old', 'handbook')"))

    await _query(empty_dsn, insert)
    await asyncio.to_thread(migrations.upgrade, empty_dsn)

    def read(conn: sa.Connection) -> dict[str, Any]:
        conn.execute(sa.text("INSERT INTO bots (name, collection) VALUES ('new', 'handbook')"))
        rows = conn.execute(sa.text("SELECT name, context_search_limit FROM bots")).all()
        return {r.name: r.context_search_limit for r in rows}

    # The row written before keeps its number; a new one stores NULL (the package default).
    assert await _query(empty_dsn, read) == {"old": 10, "new": None}
    assert validate_bot({"name": "new", "collection": "handbook"}).context_search_limit is None
