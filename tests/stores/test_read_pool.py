"""The store's private read pool: a caller's shared engine is never touched by a search,
and a connection's record of its session settings never claims what the server does not
have, even when a search is cancelled half-way."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from sqlalchemy import event, text

from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.connections.engine import make_engine
from parrot_parents.stores.postgres.connections.read_pool import (
    READ_STATEMENT_CACHE,
    ReadConnection,
)
from parrot_parents.stores.search_options import HNSWQueryOptions
from tests.conftest import unique_table

DIM = 8


def _rows(n: int) -> tuple[list[Document], np.ndarray]:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    docs = [
        Document(
            page_content=f"row {i} about pumps",
            metadata={"document_id": f"d{i}", "is_chunk": True, "group": i % 3},
        )
        for i in range(n)
    ]
    return docs, vectors


async def test_a_shared_engine_is_never_touched_by_a_search(pg_dsn: str) -> None:
    engine = await make_engine(pg_dsn, pool_size=2, max_overflow=0)
    store = PgVectorStore(
        table=unique_table("shared"),
        dimension=DIM,
        engine=engine,
        search_options=HNSWQueryOptions(ef_search=90),
    )
    docs, vectors = _rows(40)
    await store.add_documents(docs, embeddings=list(vectors))
    checkouts: list[int] = []
    event.listen(engine.sync_engine, "checkout", lambda *_: checkouts.append(1))
    try:
        for v in vectors[:5]:
            assert len(await store.similarity_search_by_vector(v, limit=3)) == 3
        assert checkouts == []  # searches never check out the caller's pool...
        found = await store.similarity_search_by_vector(
            vectors[0], limit=3, filter={"group": {"$eq": 1}}
        )
        assert len(found) == 3 and all(r.metadata["group"] == 1 for r in found)
        assert checkouts == []  # ...filtered ones neither: their values are bound there
        await store.drop()
        await store.close()
        async with engine.connect() as conn:  # the caller's engine still works
            assert (await conn.execute(text("SELECT 1"))).scalar() == 1
    finally:
        await engine.dispose()


async def _session_matches(store: PgVectorStore) -> None:
    async def check(conn: Any) -> None:
        raw = conn._con if not isinstance(conn, ReadConnection) else conn
        recorded = raw._session
        if recorded is None:
            return  # unknown: the next search sets everything again
        for name, value in recorded.items():
            actual = await conn.fetchval("SELECT current_setting($1)", name)
            assert value is None or actual == value, (name, value, actual)

    await store.read_pool.run(check)


async def test_a_search_cancelled_half_way_leaves_a_true_record(pg_dsn: str) -> None:
    store = PgVectorStore(table=unique_table("cancel"), dsn=pg_dsn, dimension=DIM)
    deep = HNSWQueryOptions().ef_search + 50
    docs, vectors = _rows(deep + 50)
    await store.add_documents(docs, embeddings=list(vectors))
    try:
        for i, delay in enumerate([0, 0.0002, 0.0005, 0.001, 0.002, 0.004, 0.008] * 2):
            # A limit above the default ef_search needs ef_search = limit, limit 10 the
            # start-up default: each search changes the session, and the cancel lands
            # before, during or after that change.
            limit = deep if i % 2 else 10
            task = asyncio.create_task(store.similarity_search_by_vector(vectors[i], limit=limit))
            await asyncio.sleep(delay)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            await _session_matches(store)
            found = await store.similarity_search_by_vector(vectors[i], limit=limit)
            assert len(found) == limit
            await _session_matches(store)
    finally:
        await store.drop()
        await store.close()


async def _kept_prepared(store: PgVectorStore, statements: int) -> int:
    """Statements prepared on one read connection after it ran ``statements`` different
    ones (each as a search's statement runs: through the connection's cache)."""

    async def cycle(conn: Any) -> int:
        for i in range(statements):
            await conn.fetch_with(f"SELECT $1::int + {i}", (i,), ())
        found = await conn.fetch_with("SELECT count(*) FROM pg_prepared_statements", (), ())
        return int(found[0][0])

    kept: int = await store.read_pool.run(cycle)
    return kept


@pytest.mark.parametrize(
    ("connect_args", "most"), [(None, READ_STATEMENT_CACHE), ({"statement_cache_size": 20}, 20)]
)
async def test_a_read_connection_keeps_its_statements_prepared(
    pg_dsn: str, connect_args: dict[str, int] | None, most: int
) -> None:
    # A value with graphs of its own is searched by a statement of its own: more values
    # than asyncpg's 100 in use would each be prepared and planned again at every search.
    kwargs: dict[str, Any] = {"connect_args": connect_args} if connect_args else {}
    store = PgVectorStore(
        table=unique_table("cache"), dsn=pg_dsn, dimension=DIM, engine_kwargs=kwargs
    )
    await store.connect()
    try:
        kept = await _kept_prepared(store, 200)
        assert min(200, most) <= kept <= min(200, most) + 2, kept
    finally:
        await store.drop()
        await store.close()
