"""The HNSW query defaults a search runs with: the ``ef_search`` measured to hold recall@10
at 0.95 on real text at 100k children (``python -m benchmarks run hnsw_recall``), not
pgvector's 40, on both paths a search takes (the read pool, and the engine for a
filtered search); and its growth with the collection's graph, up to its ceiling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from sqlalchemy import text

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.identifiers import derived_name
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.schema import HNSWIndex
from parrot_parents.stores.postgres.connections.read_pool import ReadConnection
from parrot_parents.stores.search_options import HNSWQueryOptions
from tests.conftest import unique_table

DIM = 8
MEASURED = 100
MEASURED_BUILD = 200
CEILING = 400


def test_the_defaults_are_the_measured_ones() -> None:
    assert HNSWQueryOptions().ef_search == MEASURED
    assert HNSWIndex().ef_construction == MEASURED_BUILD
    assert HNSWIndex().m == 16


def test_ef_search_grows_with_the_graph_up_to_its_ceiling() -> None:
    options = HNSWQueryOptions()
    assert options.ef_search_ceiling == CEILING
    for small in (None, 0, 760, 10_000):
        assert options.ef_at(small) == MEASURED
    # 100 * 10 ** 0.6: a walk four times as wide at 100k children.
    assert options.ef_at(100_000) == 398
    assert options.ef_at(1_000_000) == CEILING
    assert HNSWQueryOptions(ef_search_ceiling=None).ef_at(1_000_000) == MEASURED
    # A ceiling below ef_search keeps ef_search, as a user who raised it asked.
    assert HNSWQueryOptions(ef_search=600).ef_at(1_000_000) == 600


@pytest.mark.parametrize("ceiling", [0, 1001, True, 2.5, "400"])
def test_a_bad_ceiling_is_refused(ceiling: object) -> None:
    with pytest.raises(ConfigurationError, match="ef_search_ceiling"):
        HNSWQueryOptions(ef_search_ceiling=ceiling)  # type: ignore[arg-type]


@settings(max_examples=40, deadline=None)
@given(
    ef=st.integers(1, 1000),
    ceiling=st.none() | st.integers(1, 1000),
    sizes=st.lists(st.floats(0, 1e9), min_size=2, max_size=2),
)
def test_the_walk_never_narrows_as_the_graph_grows(
    ef: int, ceiling: int | None, sizes: list[float]
) -> None:
    options = HNSWQueryOptions(ef_search=ef, ef_search_ceiling=ceiling)
    small, large = sorted(sizes)
    assert ef <= options.ef_at(small) <= options.ef_at(large) <= max(ef, ceiling or ef)


async def test_a_large_graph_is_walked_wider(pg_dsn: str) -> None:
    """The size comes from the catalog's count of the index (set here by hand: a graph of
    a million vectors is no test fixture), read by a searcher at its first search."""
    table = unique_table("efgrows")
    writer = PgVectorStore(table=table, dsn=pg_dsn, dimension=DIM)
    vectors = await _filled(writer, 20, groups=2)
    reader = PgVectorStore(table=table, dsn=pg_dsn, dimension=DIM, create=False)
    try:
        async with writer.engine.begin() as conn:
            if not (
                await conn.execute(
                    text("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
                )
            ).scalar_one():
                pytest.skip("setting an index's catalog count needs a superuser")
            await conn.execute(
                text("UPDATE pg_class SET reltuples = 1e6 WHERE oid = to_regclass(:i)"),
                {"i": derived_name(table, "embedding_hnsw")},
            )
        assert await _walks(reader, vectors[0].tolist()) == [str(CEILING)] * 2
    finally:
        await reader.close()
        await writer.drop()
        await writer.close()


async def test_a_default_search_runs_at_the_default_ef_search(pg_dsn: str) -> None:
    store = PgVectorStore(table=unique_table("efdefault"), dsn=pg_dsn, dimension=DIM)
    vectors = await _filled(store, 30, groups=3)
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
        assert await _walks(store, vectors[0].tolist()) == [str(MEASURED)] * 2
    finally:
        await store.drop()
        await store.close()


async def _walks(store: PgVectorStore, vector: list[float]) -> list[str]:
    """``hnsw.ef_search`` on the read pool's session after an unfiltered search and after
    a filtered one (on ``group`` 1): the session holds what the last search set, as a
    search sets what it needs on the session when it differs."""
    seen: list[str] = []

    async def setting(conn: ReadConnection) -> None:
        seen.append(await conn.fetchval("SELECT current_setting('hnsw.ef_search')"))

    assert len(await store.similarity_search_by_vector(vector, limit=5)) == 5
    await store.read_pool.run(setting)
    found = await store.similarity_search_by_vector(vector, limit=5, filter={"group": {"$eq": 1}})
    assert found and all(r.metadata["group"] == 1 for r in found)
    await store.read_pool.run(setting)
    return seen


async def _filled(store: PgVectorStore, rows: int, groups: int) -> np.ndarray:
    """``rows`` random vectors written to ``store``, row ``i`` in ``group`` ``i % groups``."""
    vectors = np.random.default_rng(rows).standard_normal((rows, DIM)).astype(np.float32)
    docs = [
        Document(page_content=f"row {i}", metadata={"document_id": f"d{i}", "group": i % groups})
        for i in range(rows)
    ]
    await store.add_documents(docs, embeddings=list(vectors))
    return vectors
