"""Value graphs (:mod:`parrot_parents.stores.postgres.collections.value_graphs`): a filter
key's values past the floor get an HNSW graph of their own, built when the key is given,
by the write that takes a value past the floor, and at the end of a bulk load; a search
whose filter reads that key alone ranks through the graphs of the values it fixes (one,
or an ``$in`` of several) and finds what the exact ranking finds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from sqlalchemy import text

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.partition_keys import fixed_values, only_key
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.partitions import partition_index_name
from parrot_parents.stores.postgres.collections.schema import HNSWIndex
from parrot_parents.stores.postgres.collections.value_graphs import floor_for, read_value_graphs
from parrot_parents.stores.postgres.search.filter_plan import threshold
from tests.conftest import unique_table

#: Children per ``dept``: two past the floor, one under it.
SIZES = {"big": 50, "bigger": 40, "small": 10}
FLOOR = 30


def _rows(sizes: dict[str, int], seed: int) -> tuple[list[Document], np.ndarray]:
    rng = np.random.default_rng(seed)
    docs, vectors = [], []
    for dept, n in sizes.items():
        for i in range(n):
            body = f"child {i} of {dept} about leave and pay"
            meta = {
                "document_id": f"{dept}-{seed}-{i}",
                "is_chunk": True,
                "start_index": 0,
                "end_index": len(body),
                "dept": dept,
                "year": 2020 + i % 3,
            }
            docs.append(Document(id=f"{dept}-{seed}-{i}#c", page_content=body, metadata=meta))
            v = rng.standard_normal(384).astype(np.float32)
            vectors.append(v / np.linalg.norm(v))
    return docs, np.stack(vectors)


def _exact(docs: list[Document], vectors: np.ndarray, q: np.ndarray, keep: Any, k: int) -> list:
    kept = [i for i, d in enumerate(docs) if keep(d.metadata)]
    order = sorted(kept, key=lambda i: (-float(vectors[i] @ q), docs[i].id))
    return [str(docs[i].id) for i in order[:k]]


async def _indexes(store: PgVectorStore) -> set[str]:
    async with store.engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT indexname FROM pg_indexes WHERE tablename = :t"), {"t": store.table}
        )
        return {r[0] for r in rows}


def _graph(store: PgVectorStore, dept: str) -> str:
    return partition_index_name(store.table, "dept", dept)


def _keyed(pg_dsn: str, table: str, embeddings: Any, floor: int | None = FLOOR) -> PgVectorStore:
    """A store of ``table`` with the filter key ``dept`` and the value graph ``floor``."""
    return PgVectorStore(
        dsn=pg_dsn,
        table=table,
        embedding=embeddings,
        filter_keys=["dept"],
        hnsw=HNSWIndex(value_graph_floor=floor),
    )


@pytest.fixture(scope="module")
def graphed(pg_dsn: str, embeddings: Any) -> Iterator[tuple[str, list[Document], np.ndarray]]:
    """``(table, docs, vectors)``: a collection with the filter key ``dept`` and a floor
    of :data:`FLOOR`, written in one batch (the collection's own graph present: the write
    builds the graphs). Built once for the module, dropped after."""
    table = unique_table("vg")
    docs, vectors = _rows(SIZES, 1)

    async def build() -> None:
        async with _keyed(pg_dsn, table, embeddings) as store:
            await store.add_documents(docs, embeddings=vectors.tolist())

    async def drop() -> None:
        async with PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings) as store:
            await store.drop()

    asyncio.run(build())
    yield table, docs, vectors
    asyncio.run(drop())


def _open(pg_dsn: str, table: str, embeddings: Any) -> PgVectorStore:
    return PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings, create=False)


async def test_a_write_gives_the_values_past_the_floor_graphs_and_the_others_none(
    graphed: tuple[str, list[Document], np.ndarray], pg_dsn: str, embeddings: Any
) -> None:
    async with _open(pg_dsn, graphed[0], embeddings) as store:
        names = await _indexes(store)
        async with store.engine.connect() as conn:
            counted = await conn.run_sync(read_value_graphs, store.name)
    assert {_graph(store, "big"), _graph(store, "bigger")} <= names
    assert _graph(store, "small") not in names
    assert counted == {"dept": 2}


async def test_a_search_fixing_a_value_ranks_through_its_graph_as_exact_search_ranks(
    graphed: tuple[str, list[Document], np.ndarray], pg_dsn: str, embeddings: Any
) -> None:
    table, docs, vectors = graphed
    async with _open(pg_dsn, table, embeddings) as store:
        rng = np.random.default_rng(2)
        for _ in range(4):
            q = rng.standard_normal(384).astype(np.float32)
            q /= np.linalg.norm(q)
            found = await store.similarity_search_by_vector(
                q.tolist(), limit=6, filter={"dept": "big"}
            )
            assert [d.id for d in found] == _exact(
                docs, vectors, q, lambda m: m["dept"] == "big", 6
            )
            assert found.filter_plan is not None and found.filter_plan.search == "partition"
            assert found.filter_plan.partition_index == _graph(store, "big")
            small = await store.similarity_search_by_vector(
                q.tolist(), limit=6, filter={"dept": {"$eq": "small"}}
            )
            assert small.filter_plan is not None and small.filter_plan.search == "exact"
            assert [d.id for d in small] == _exact(
                docs, vectors, q, lambda m: m["dept"] == "small", 6
            )


async def test_an_in_of_values_with_graphs_scans_each_and_keeps_the_nearest(
    graphed: tuple[str, list[Document], np.ndarray], pg_dsn: str, embeddings: Any
) -> None:
    table, docs, vectors = graphed
    async with _open(pg_dsn, table, embeddings) as store:
        q = vectors[7]
        both = {"dept": {"$in": ["bigger", "big"]}}
        for mode in ("dense", "hybrid"):
            found = await store.similarity_search_by_vector(
                q.tolist(), limit=8, filter=both, search_mode=mode, query="leave and pay"
            )
            assert found.filter_plan is not None and found.filter_plan.search == "partition"
            assert set(str(found.filter_plan.partition_index).split(", ")) == {
                _graph(store, "big"),
                _graph(store, "bigger"),
            }
            assert {d.metadata["dept"] for d in found} <= {"big", "bigger"}
            if mode == "dense":
                assert [d.id for d in found] == _exact(
                    docs, vectors, q, lambda m: m["dept"] in ("big", "bigger"), 8
                )
        # A value without a graph in the list: the collection's indexes, as before.
        mixed = await store.similarity_search_by_vector(
            q.tolist(), limit=8, filter={"dept": {"$in": ["big", "small"]}}
        )
        assert mixed.filter_plan is not None and mixed.filter_plan.search != "partition"
        assert [d.id for d in mixed] == _exact(
            docs, vectors, q, lambda m: m["dept"] in ("big", "small"), 8
        )


async def test_a_filter_with_more_than_the_key_is_planned_by_its_estimate(
    graphed: tuple[str, list[Document], np.ndarray], pg_dsn: str, embeddings: Any
) -> None:
    table, docs, vectors = graphed
    async with _open(pg_dsn, table, embeddings) as store:
        q = vectors[3]
        flt = {"dept": "big", "year": 2021}
        found = await store.similarity_search_by_vector(q.tolist(), limit=5, filter=flt)
        assert found.filter_plan is not None and found.filter_plan.search == "exact"
        assert [d.id for d in found] == _exact(
            docs, vectors, q, lambda m: m["dept"] == "big" and m["year"] == 2021, 5
        )


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    depts=st.lists(st.sampled_from(["big", "bigger", "small", "none"]), min_size=1, max_size=3),
    seed=st.integers(0, 2**16),
    k=st.integers(1, 12),
)
def test_a_search_through_graphs_finds_what_the_exact_ranking_finds(
    graphed: tuple[str, list[Document], np.ndarray],
    pg_dsn: str,
    embeddings: Any,
    depts: list[str],
    seed: int,
    k: int,
) -> None:
    table, docs, vectors = graphed
    rng = np.random.default_rng(seed)
    q = rng.standard_normal(384).astype(np.float32)
    q /= np.linalg.norm(q)
    flt = {"dept": depts[0]} if len(depts) == 1 else {"dept": {"$in": depts}}

    async def run() -> list[str]:
        async with _open(pg_dsn, table, embeddings) as store:
            found = await store.similarity_search_by_vector(q.tolist(), limit=k, filter=flt)
            return [str(d.id) for d in found]

    assert asyncio.run(run()) == _exact(docs, vectors, q, lambda m: m["dept"] in depts, k)


@pytest.fixture
async def fresh(pg_dsn: str, embeddings: Any) -> AsyncIterator[PgVectorStore]:
    """An empty collection of :func:`_keyed`, dropped after the test."""
    store = _keyed(pg_dsn, unique_table("vgf"), embeddings)
    try:
        yield store
    finally:
        await store.drop()
        await store.close()


async def test_a_value_growing_past_the_floor_gets_its_graph_from_the_write(
    fresh: PgVectorStore,
) -> None:
    store = fresh
    first, v1 = _rows({"grows": 20}, 3)
    await store.add_documents(first, embeddings=v1.tolist())
    assert _graph(store, "grows") not in await _indexes(store)
    more, v2 = _rows({"grows": 15}, 4)
    await store.add_documents(more, embeddings=v2.tolist())
    assert _graph(store, "grows") in await _indexes(store)
    docs, vectors = first + more, np.concatenate([v1, v2])
    q = vectors[0]
    found = await store.similarity_search_by_vector(q.tolist(), limit=5, filter={"dept": "grows"})
    assert [d.id for d in found] == _exact(docs, vectors, q, lambda m: True, 5)


async def test_a_bulk_load_builds_the_graphs_after_the_collection_s_own(
    fresh: PgVectorStore,
) -> None:
    store = fresh
    docs, vectors = _rows(SIZES, 5)
    await store.connect()
    async with store.bulk_load() as load:
        for start in range(0, len(docs), 25):
            part = slice(start, start + 25)
            await store.add_documents(docs[part], embeddings=vectors[part].tolist())
        # The writes of a load leave the graphs to its end.
        assert _graph(store, "big") not in await _indexes(store)
    assert _graph(store, "big") in load.graphs and _graph(store, "bigger") in load.graphs
    assert _graph(store, "small") not in await _indexes(store)
    assert load.graph_seconds is not None


async def test_a_key_given_to_a_filled_collection_builds_its_graphs_and_none_without_a_floor(
    pg_dsn: str, embeddings: Any
) -> None:
    table = unique_table("vge")
    plain = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings)
    try:
        docs, vectors = _rows(SIZES, 6)
        await plain.add_documents(docs, embeddings=vectors.tolist())
        async with _keyed(pg_dsn, table, embeddings, None) as off:
            await off.connect()
            assert _graph(off, "big") not in await _indexes(off)
        async with _keyed(pg_dsn, table, embeddings) as keyed:
            await keyed.connect()
            names = await _indexes(keyed)
            assert {_graph(keyed, "big"), _graph(keyed, "bigger")} <= names
            assert _graph(keyed, "small") not in names
            q = vectors[11]
            found = await keyed.similarity_search_by_vector(
                q.tolist(), limit=4, filter={"dept": "bigger"}
            )
            assert found.filter_plan is not None and found.filter_plan.search == "partition"
            assert [d.id for d in found] == _exact(
                docs, vectors, q, lambda m: m["dept"] == "bigger", 4
            )
    finally:
        await plain.drop()
        await plain.close()


@pytest.mark.parametrize("bad", [-1, 1.5, "4000", True])
def test_a_bad_value_graph_floor_is_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="value_graph_floor"):
        HNSWIndex(value_graph_floor=bad)


def test_the_values_a_filter_fixes_are_read_from_its_top_level() -> None:
    assert fixed_values({"dept": "a"}, "dept") == ["a"]
    assert fixed_values({"dept": {"$in": ["a", "b", "a"]}}, "dept") == ["a", "b"]
    assert fixed_values({"$and": [{"dept": {"$in": ["a", "b"]}}, {"dept": "b"}]}, "dept") == ["b"]
    # 1 and True are two values; a float has no graph; nothing common matches nothing.
    assert fixed_values({"dept": {"$in": [1, True]}}, "dept") == [1, True]
    assert fixed_values({"dept": {"$in": [1.5]}}, "dept") is None
    assert fixed_values({"$and": [{"dept": "a"}, {"dept": "b"}]}, "dept") is None
    assert fixed_values({"dept": {"$nin": ["a"]}}, "dept") is None
    assert fixed_values({"$or": [{"dept": "a"}]}, "dept") is None
    assert only_key({"dept": {"$in": ["a"]}}, "dept")
    assert only_key({"$and": [{"dept": "a"}, {"dept": {"$in": ["a"]}}]}, "dept")
    assert not only_key({"dept": "a", "year": 1}, "dept")
    assert not only_key({"$and": [{"dept": "a"}, {"year": 1}]}, "dept")
    assert not only_key({}, "dept")


@given(
    values=st.lists(st.one_of(st.text(max_size=3), st.integers(-3, 3), st.booleans()), max_size=12)
)
def test_a_fixed_list_holds_every_value_a_matching_row_may_have(values: list[Any]) -> None:
    found = fixed_values({"dept": {"$in": values}}, "dept")
    if not values:
        assert found is None
        return
    assert found is not None
    # Each value once, told apart as JSON tells them apart, in the order given.
    seen: list[Any] = []
    for v in values:
        if not any(type(v) is type(s) and v == s for s in seen):
            seen.append(v)
    assert found == seen
    assert len(found) <= len(values)


def test_the_floor_grows_with_the_collection_as_the_exact_threshold_does() -> None:
    assert floor_for(4000, 0) == floor_for(4000, 100_000) == 4000
    # A million children: the values a search would rank exactly get no graph.
    assert floor_for(4000, 1_000_000) == threshold(4000, 1_000_000) > 15_000
    assert floor_for(30, 2_000_000) > floor_for(30, 200_000) > 30
