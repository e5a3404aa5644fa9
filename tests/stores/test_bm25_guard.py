"""The store's guard of a pg_textsearch ``bm25`` index on a release that can hang (the
embedded server's 1.0.0): writers serialised under the collection's advisory lock,
autovacuum off for the table, and the index rebuilt before a ``VACUUM``
(:mod:`parrot_parents.stores.postgres.search.bm25_guard`)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.documents import Document
from sqlalchemy import text

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.search.bm25_guard import (
    describe_guard,
    maintenance_due,
    needs_guard,
    read_bm25_version,
)
from parrot_parents.stores.postgres.search.bm25_index import bm25_index_name
from tests.conftest import fresh_store

VECTOR = [0.1] * 384
TEXTS = {
    "a": "leave leave leave days paid",
    "b": "paid paid holiday for staff and paid leave",
    "c": "days of leave are paid days",
}


def _rows(document_id: str, body: str) -> list[Document]:
    meta = {"document_id": document_id, "is_chunk": True, "start_index": 0, "end_index": len(body)}
    return [Document(id=f"{document_id}#c:0-{len(body)}", page_content=body, metadata=meta)]


async def _write(store: PgVectorStore, texts: dict[str, str]) -> None:
    for k, body in texts.items():
        await store.replace_document(k, _rows(k, body), embeddings=[VECTOR])


async def _scalar(store: PgVectorStore, sql: str, **params: Any) -> Any:
    engine, _ = await store.ready()
    async with engine.connect() as conn:
        return (await conn.execute(text(sql), params)).scalar()


async def _autovacuum_off(store: PgVectorStore) -> bool:
    return bool(
        await _scalar(
            store,
            "SELECT coalesce('autovacuum_enabled=false' = ANY (reloptions), false)"
            " FROM pg_class WHERE oid = CAST(:t AS regclass)",
            t=store.name.quoted(),
        )
    )


@pytest.fixture
async def guarded(pg_dsn: str, embeddings: Any) -> Any:
    """A pg_textsearch collection on a server whose release needs the guard."""
    async with fresh_store(pg_dsn, embeddings, lexical_backend="pg_textsearch") as s:
        engine, _ = await s.ready()
        async with engine.connect() as conn:
            version = await conn.run_sync(read_bm25_version)
        if not needs_guard(version):
            pytest.skip(f"pg_textsearch {version} needs no guard")
        yield s


async def test_a_guarded_collection_has_autovacuum_off(guarded: PgVectorStore) -> None:
    assert guarded.guard is not None
    assert await _autovacuum_off(guarded)


async def test_without_the_whole_guard_autovacuum_stays_the_servers(
    guarded: PgVectorStore, pg_dsn: str, embeddings: Any
) -> None:
    async with fresh_store(
        pg_dsn, embeddings, lexical_backend="pg_textsearch", bm25_guard="writers"
    ) as s:
        assert s.guard is not None and not s.guard.full  # the writers' lock alone
        assert not await _autovacuum_off(s)
    async with fresh_store(
        pg_dsn, embeddings, lexical_backend="pg_textsearch", bm25_guard="off"
    ) as s:
        assert s.guard is None and not await _autovacuum_off(s)
    async with fresh_store(pg_dsn, embeddings, lexical_backend="sql") as s:
        assert s.guard is None and not await _autovacuum_off(s)


async def test_a_second_writer_waits_while_the_first_holds_the_lock(
    guarded: PgVectorStore,
) -> None:
    await _write(guarded, {"a": TEXTS["a"]})
    assert guarded.guard is not None
    engine, _ = await guarded.ready()
    async with engine.connect() as first:
        async with first.begin():
            await guarded.guard.lock(first)  # the first writer, mid-transaction
            second = asyncio.create_task(_write(guarded, {"b": TEXTS["b"]}))
            await asyncio.sleep(1.0)
            assert not second.done()
            waiting = await _scalar(
                guarded,
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'",
            )
            assert waiting >= 1
        await asyncio.wait_for(second, 30)
    assert await guarded.count(include_parents=False) == 2


async def test_vacuum_rebuilds_a_guarded_index_and_searches_agree(
    guarded: PgVectorStore,
) -> None:
    await _write(guarded, TEXTS)
    await guarded.delete("c")
    before = await guarded.similarity_search("paid leave", limit=10, search_mode="lexical")
    index = guarded.name.quoted(bm25_index_name(guarded.table))
    oid = await _scalar(guarded, "SELECT CAST(CAST(:i AS regclass) AS oid)", i=index)
    assert await guarded.vacuum() is True
    after = await guarded.similarity_search("paid leave", limit=10, search_mode="lexical")
    assert [r.id for r in after] == [r.id for r in before] and len(after) == 2
    assert await _scalar(guarded, "SELECT CAST(CAST(:i AS regclass) AS oid)", i=index) != oid
    # The writes sat in the index's memtable; the rebuild wrote them to a segment.
    summary = await _scalar(guarded, "SELECT bm25_summarize_index(:i)", i=index)
    assert "documents: 0" in summary and "Segment 1" in summary
    await _write(guarded, {"c": TEXTS["c"]})  # the writers go on after the swap
    assert len(await guarded.similarity_search("days", limit=10, search_mode="lexical")) == 2


async def test_vacuum_without_a_guard_is_a_plain_vacuum(pg_dsn: str, embeddings: Any) -> None:
    async with fresh_store(pg_dsn, embeddings, lexical_backend="sql") as s:
        await _write(s, TEXTS)
        assert await s.vacuum() is False


def test_a_bad_guard_choice_is_refused() -> None:
    with pytest.raises(
        ConfigurationError, match="bm25_guard must be auto, writers or off; got 'on'"
    ):
        PgVectorStore(table="t_guard", bm25_guard="on")  # type: ignore[arg-type]


def test_doctor_names_the_guard_a_release_gets() -> None:
    assert describe_guard(None, True) == "none (no pg_textsearch)"
    assert describe_guard((1, 3, 0), True) == "none needed (pg_textsearch 1.3.0)"
    assert describe_guard((1, 0, 0), True).startswith("on (pg_textsearch 1.0.0): writers under")
    assert describe_guard((1, 0, 0), False).startswith("writers only (pg_textsearch 1.0.0")


def test_maintenance_is_due_by_autovacuums_default_rule() -> None:
    # 100k live rows: due past 50 + 20 % dead rows, or 1000 + 20 % inserted ones.
    assert not maintenance_due(dead=20_050, live=100_000, inserted=0)
    assert maintenance_due(dead=20_051, live=100_000, inserted=0)
    assert not maintenance_due(dead=0, live=100_000, inserted=21_000)
    assert maintenance_due(dead=0, live=100_000, inserted=21_001)
    assert maintenance_due(dead=51, live=0, inserted=0)
