"""The pools under bursts of concurrent searches."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from langchain_core.documents import Document
from sqlalchemy import event

from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.connections.read_pool import READ_POOL_SIZE
from tests.conftest import unique_table


async def test_a_second_burst_opens_no_connection(pg_dsn: str) -> None:
    """A pool that closes connections on return opens them again in every burst (a
    server process and four round trips each); the read pool keeps what it opened."""
    store = PgVectorStore(dsn=pg_dsn, table=unique_table("pool"), dimension=4)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((20, 4)).astype(np.float32)
    docs = [Document(page_content=f"row {i}", metadata={"is_chunk": True}) for i in range(20)]
    await store.add_documents(docs, embeddings=list(vectors))
    engine, _ = await store.ready()
    opened = []
    event.listen(engine.sync_engine, "connect", lambda *_: opened.append(1))

    async def burst() -> None:
        found = await asyncio.gather(
            *(store.similarity_search_by_vector(v, limit=3) for v in np.tile(vectors, (3, 1)))
        )
        assert all(len(r) == 3 for r in found)

    try:
        await burst()
        first = store.read_pool.opened
        assert 1 <= first <= READ_POOL_SIZE
        await burst()
        assert store.read_pool.opened == first
        assert opened == []  # unfiltered searches never use the engine
    finally:
        await store.drop()
        await store.close()


async def test_an_exhausted_pool_is_reported_as_such(pg_dsn: str) -> None:
    """Every connection held by the caller: the error says so, not that pgvector is
    missing (it said "cannot prepare the pgvector extension: TimeoutError")."""
    from parrot_parents.errors import StoreError
    from parrot_parents.stores.postgres.connections.engine import make_engine

    engine = await make_engine(pg_dsn, pool_size=1, max_overflow=0, pool_timeout=0.5)
    held = await engine.connect()
    try:
        store = PgVectorStore(table=unique_table("exhausted"), dimension=4, engine=engine)
        with pytest.raises(StoreError, match="no pooled connection was free") as caught:
            await store.connect()
        assert not caught.value.unavailable
        assert "pool_size" in (caught.value.hint or "")
    finally:
        await held.close()
        await engine.dispose()
