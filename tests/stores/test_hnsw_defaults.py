"""The HNSW query defaults a search runs with: the ``ef_search`` measured to hold recall@10
at 0.95 on real text at 100k children (``python -m benchmarks run hnsw_recall``), not
pgvector's 40, on both paths a search takes (the read pool, and the engine for a
filtered search)."""

from __future__ import annotations

import numpy as np
from langchain_core.documents import Document
from sqlalchemy import text

from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.schema import HNSWIndex
from parrot_parents.stores.postgres.connections.read_pool import ReadConnection
from parrot_parents.stores.search_options import HNSWQueryOptions
from tests.conftest import unique_table

DIM = 8
MEASURED = 100
MEASURED_BUILD = 200


def test_the_defaults_are_the_measured_ones() -> None:
    assert HNSWQueryOptions().ef_search == MEASURED
    assert HNSWIndex().ef_construction == MEASURED_BUILD
    assert HNSWIndex().m == 16


async def test_a_default_search_runs_at_the_default_ef_search(pg_dsn: str) -> None:
    store = PgVectorStore(table=unique_table("efdefault"), dsn=pg_dsn, dimension=DIM)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((30, DIM)).astype(np.float32)
    docs = [
        Document(page_content=f"row {i}", metadata={"document_id": f"d{i}", "group": i % 3})
        for i in range(30)
    ]
    await store.add_documents(docs, embeddings=list(vectors))
    async with store.engine.connect() as conn:
        definition = (
            await conn.execute(
                text(
                    "SELECT indexdef FROM pg_indexes"
                    " WHERE tablename = :t AND indexdef LIKE '%hnsw%'"
                ),
                {"t": store.table},
            )
        ).scalar_one()
    assert f"ef_construction='{MEASURED_BUILD}'" in definition, definition
    try:
        seen: list[str] = []

        async def setting(conn: ReadConnection) -> None:
            seen.append(await conn.fetchval("SELECT current_setting('hnsw.ef_search')"))

        # The read pool's session holds the setting after a search, filtered or not: a
        # search sets what it needs on the session when it differs.
        assert len(await store.similarity_search_by_vector(vectors[0], limit=5)) == 5
        await store.read_pool.run(setting)
        found = await store.similarity_search_by_vector(
            vectors[0], limit=5, filter={"group": {"$eq": 1}}
        )
        assert found and all(r.metadata["group"] == 1 for r in found)
        await store.read_pool.run(setting)
        assert seen == [str(MEASURED)] * 2
    finally:
        await store.drop()
        await store.close()
