"""A collection's partition key (:mod:`parrot_parents.stores.postgres.collections.partitions`):
an HNSW index per value, built by the write that first stores it, and searches whose filter
or scope fixes the key ranked through that index, with the same answers as exact search."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from sqlalchemy import text

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.parents import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.documents import DocumentRecord
from parrot_parents.stores.postgres.collections.partitions import (
    fixed_value,
    partition_index_name,
    partition_values,
    validate_partition_key,
)
from parrot_parents.stores.postgres.search.hybrid import CandidateRule
from parrot_parents.stores.search_options import HNSWQueryOptions
from tests.conftest import unique_table

TENANTS: list[str | int] = ["a", "b", "1", 1]
PER_TENANT = 60


def child_row(document_id: str, body: str, start: int = 0, **metadata: Any) -> Document:
    """A child row of ``document_id`` at ``start`` (its id and offsets), with ``metadata``."""
    end = start + len(body)
    meta = {"document_id": document_id, "is_chunk": True, "start_index": start}
    return Document(
        id=f"{document_id}#c:{start}-{end}",
        page_content=body,
        metadata={**meta, "end_index": end, **metadata},
    )


def _rows(rng: np.random.Generator) -> tuple[list[Document], np.ndarray]:
    docs, vectors = [], []
    for t, tenant in enumerate(TENANTS):
        for i in range(PER_TENANT):
            body = f"child {i} of tenant {tenant} about leave and pay"
            docs.append(child_row(f"d{t}_{i}", body, tenant=tenant, year=2020 + i % 3))
            v = rng.standard_normal(384).astype(np.float32)
            vectors.append(v / np.linalg.norm(v))
    return docs, np.stack(vectors)


@pytest.fixture
async def partitioned(
    pg_dsn: str, embeddings: Any
) -> AsyncIterator[tuple[PgVectorStore, list[Document], np.ndarray]]:
    store = PgVectorStore(
        dsn=pg_dsn, table=unique_table("part"), embedding=embeddings, partition_key="tenant"
    )
    docs, vectors = _rows(np.random.default_rng(11))
    await store.add_documents(docs, embeddings=vectors.tolist())
    try:
        yield store, docs, vectors
    finally:
        await store.drop()
        await store.close()


async def _index_names(store: PgVectorStore) -> set[str]:
    async with store.engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT indexname FROM pg_indexes WHERE tablename = :t"), {"t": store.table}
        )
        return {r[0] for r in rows}


async def _scans(store: PgVectorStore, index: str, *, at_least: int = 0) -> int:
    """The index's scans so far. A backend reports its statistics when it exits (or only
    after a while idle), a moment after its client has gone: so the store's connections are
    closed first, and a count expected to reach ``at_least`` is read again until it does, for
    at most 15 seconds."""
    deadline = asyncio.get_running_loop().time() + 15
    while True:
        await store.close()
        await store.connect()
        async with store.engine.connect() as conn:
            found = await conn.execute(
                text("SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = :i"),
                {"i": index},
            )
            scans = int(found.scalar_one())
        await store.close()
        if scans >= at_least or asyncio.get_running_loop().time() > deadline:
            return scans
        await asyncio.sleep(0.1)


def _one_row_each(tenants: list[Any], seed: int) -> tuple[list[Document], list[list[float]]]:
    """One child per entry of ``tenants`` (its ``tenant``), each with a random unit vector."""
    rng = np.random.default_rng(seed)
    docs, vectors = [], []
    for t, tenant in enumerate(tenants):
        body = f"row {t} of tenant {tenant}, about leave"
        meta = {"document_id": f"d{t}", "is_chunk": True, "start_index": 0, "end_index": len(body)}
        docs.append(Document(id=f"d{t}#c", page_content=body, metadata={**meta, "tenant": tenant}))
        v = rng.standard_normal(384).astype(np.float32)
        vectors.append((v / np.linalg.norm(v)).tolist())
    return docs, vectors


def _exact(
    docs: list[Document], vectors: np.ndarray, q: np.ndarray, keep: Any, k: int
) -> list[str]:
    kept = [i for i, d in enumerate(docs) if keep(d.metadata)]
    order = sorted(kept, key=lambda i: (-float(vectors[i] @ q), docs[i].id))
    return [str(docs[i].id) for i in order[:k]]


async def test_each_value_gets_its_own_index_and_a_string_never_shares_a_number_s(
    partitioned: tuple[PgVectorStore, list[Document], np.ndarray],
) -> None:
    store, _, _ = partitioned
    names = await _index_names(store)
    wanted = {partition_index_name(store.table, "tenant", t) for t in TENANTS}
    assert len(wanted) == len(TENANTS)  # "1" and 1 apart
    assert wanted <= names
    assert store.partition_key == "tenant"


def test_values_are_told_apart_as_json_tells_them_apart() -> None:
    rows = [{"t": 1}, {"t": True}, {"t": 1.0}, {"t": "1"}, {"t": False}, {"t": 0}, {"t": 1}]
    found = partition_values(rows, "t")
    assert found == [1, True, "1", False, 0]
    assert [type(v) for v in found] == [int, bool, str, bool, int]


async def test_true_and_1_written_together_each_get_their_own_index(
    pg_dsn: str, embeddings: Any
) -> None:
    store = PgVectorStore(
        dsn=pg_dsn, table=unique_table("parttf"), embedding=embeddings, partition_key="tenant"
    )
    docs, vectors = _one_row_each([1, True] * 4, 5)
    try:
        await store.add_documents(docs, embeddings=vectors)
        names = await _index_names(store)
        for value in (1, True):
            assert partition_index_name(store.table, "tenant", value) in names, value
            found = await store.similarity_search_by_vector(
                vectors[0], limit=4, filter={"tenant": value}
            )
            assert found.filter_plan is not None and found.filter_plan.search == "partition"
            assert {type(d.metadata["tenant"]) for d in found} == {type(value)}
            assert len(found) == 4
    finally:
        await store.drop()
        await store.close()


async def test_a_search_fixing_the_key_ranks_through_its_index_as_exact_search_ranks(
    partitioned: tuple[PgVectorStore, list[Document], np.ndarray],
) -> None:
    store, docs, vectors = partitioned
    rng = np.random.default_rng(5)
    index = partition_index_name(store.table, "tenant", "b")
    before = await _scans(store, index)
    for _ in range(5):
        q = rng.standard_normal(384).astype(np.float32)
        q /= np.linalg.norm(q)
        found = await store.similarity_search_by_vector(
            q.tolist(), limit=8, filter={"tenant": "b", "year": 2021}
        )
        assert [d.id for d in found] == _exact(
            docs, vectors, q, lambda m: m["tenant"] == "b" and m["year"] == 2021, 8
        )
        assert found.filter_plan is not None
        assert found.filter_plan.search == "partition"
        assert found.filter_plan.partition_index == index
        # The number 1 and the string "1" are different values.
        ones = await store.similarity_search_by_vector(q.tolist(), limit=5, filter={"tenant": 1})
        assert [d.id for d in ones] == _exact(docs, vectors, q, lambda m: m["tenant"] == 1, 5)
    assert await _scans(store, index, at_least=before + 5) >= before + 5


async def test_a_value_graph_holds_half_precision_and_distances_stay_full_precision(
    partitioned: tuple[PgVectorStore, list[Document], np.ndarray],
) -> None:
    store, docs, vectors = partitioned
    index = partition_index_name(store.table, "tenant", "a")
    async with store.engine.connect() as conn:
        definition = (
            await conn.execute(
                text("SELECT indexdef FROM pg_indexes WHERE indexname = :i"), {"i": index}
            )
        ).scalar_one()
    assert "halfvec(384)" in definition and "halfvec_cosine_ops" in definition
    q = vectors[7]
    found = await store.similarity_search_by_vector(q.tolist(), limit=6, filter={"tenant": "a"})
    assert [d.id for d in found] == _exact(docs, vectors, q, lambda m: m["tenant"] == "a", 6)
    by_id = {str(d.id): i for i, d in enumerate(docs)}
    for hit in found:
        # Float32 cosine distance, not the half-precision one the graph orders by.
        want = 1.0 - float(vectors[by_id[str(hit.id)]] @ q)
        assert hit.distance == pytest.approx(want, abs=1e-6)


async def test_a_value_graph_over_full_vectors_is_read_as_such(
    partitioned: tuple[PgVectorStore, list[Document], np.ndarray], pg_dsn: str, embeddings: Any
) -> None:
    """A value's index built over ``embedding`` itself (a server without ``halfvec``, or
    a collection keyed before the graphs were half precision) ranks its value's search."""
    store, docs, vectors = partitioned
    index = partition_index_name(store.table, "tenant", "b")
    async with store.engine.begin() as conn:
        await conn.execute(text(f'DROP INDEX "{index}"'))
        await conn.execute(
            text(
                f'CREATE INDEX "{index}" ON "{store.table}" USING hnsw'
                " (embedding vector_cosine_ops) WHERE (cmetadata -> 'tenant') = '\"b\"'::jsonb"
            )
        )
    await store.close()
    reopened = PgVectorStore(dsn=pg_dsn, table=store.table, embedding=embeddings, create=False)
    await reopened.connect()
    try:
        before = await _scans(reopened, index)
        await reopened.connect()
        q = vectors[70]
        found = await reopened.similarity_search_by_vector(
            q.tolist(), limit=6, filter={"tenant": "b"}
        )
        assert [d.id for d in found] == _exact(docs, vectors, q, lambda m: m["tenant"] == "b", 6)
        assert found.filter_plan is not None and found.filter_plan.search == "partition"
        assert await _scans(reopened, index, at_least=before + 1) > before
    finally:
        await reopened.close()


async def test_a_value_graph_is_searched_with_its_own_ef_search(
    partitioned: tuple[PgVectorStore, list[Document], np.ndarray], pg_dsn: str, embeddings: Any
) -> None:
    store, _, vectors = partitioned
    options = HNSWQueryOptions(ef_search=60, partition_ef_search=150)
    other = PgVectorStore(
        dsn=pg_dsn, table=store.table, embedding=embeddings, create=False, search_options=options
    )

    async def ef_search(conn: Any) -> str:
        return str(await conn.fetchval("SELECT current_setting('hnsw.ef_search')"))

    try:
        await other.similarity_search_by_vector(
            vectors[0].tolist(), limit=5, filter={"tenant": "a"}
        )
        assert await other.read_pool.run(ef_search) == "150"
        await other.similarity_search_by_vector(vectors[0].tolist(), limit=5)
        assert await other.read_pool.run(ef_search) == "60"
        # A filter that does not fix the key walks the collection's graph.
        await other.similarity_search_by_vector(vectors[0].tolist(), limit=5, filter={"year": 2021})
        assert await other.read_pool.run(ef_search) == "60"
    finally:
        await other.close()


async def test_a_value_s_search_is_planned_once_on_a_connection_and_then_reused(
    partitioned: tuple[PgVectorStore, list[Document], np.ndarray],
) -> None:
    store, docs, vectors = partitioned
    rng = np.random.default_rng(9)
    for mode in ("dense", "hybrid"):
        for _ in range(3):
            q = rng.standard_normal(384).astype(np.float32)
            q /= np.linalg.norm(q)
            found = await store.similarity_search_by_vector(
                q.tolist(), 6, False, {"tenant": "b"}, search_mode=mode, query="leave and pay"
            )
            assert found.filter_plan is not None and found.filter_plan.search == "partition"
            if mode == "dense":
                assert [d.id for d in found] == _exact(
                    docs, vectors, q, lambda m: m["tenant"] == "b", 6
                )

    async def plans(conn: Any) -> list[Any]:
        # The read pool hands out the connection it used last: the one that searched.
        return list(
            await conn.fetch(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE '%''\"b\"''::jsonb%'"
            )
        )

    found_plans = await store.read_pool.run(plans)
    # One statement per mode, each planned once (a generic plan) and run three times:
    # a value written into its statement, not bound and planned again at every run.
    assert len(found_plans) == 2
    assert all(generic == 3 and custom == 0 for generic, custom in found_plans)


async def test_a_value_that_reads_as_sql_or_a_placeholder_is_only_a_value(
    pg_dsn: str, embeddings: Any
) -> None:
    store = PgVectorStore(
        dsn=pg_dsn, table=unique_table("partq"), embedding=embeddings, partition_key="tenant"
    )
    odd = ["O'Brien \\' $1 %s :x", "O'Brien", 'a"b', "caf\u00e9 \u2603"]
    docs, vectors = _one_row_each(odd * 3, 3)
    try:
        await store.add_documents(docs, embeddings=vectors)
        for value in odd:
            for mode in ("dense", "hybrid"):
                found = await store.similarity_search_by_vector(
                    vectors[0],
                    3,
                    False,
                    {"tenant": value},
                    search_mode=mode,
                    query="leave",
                )
                assert found.filter_plan is not None and found.filter_plan.search == "partition"
                assert sorted(str(d.id) for d in found) == sorted(
                    str(d.id) for d in docs if d.metadata["tenant"] == value
                ), (value, mode)
    finally:
        await store.drop()
        await store.close()


@pytest.mark.parametrize("bad", [0, 1001, 2.5, True])
def test_a_bad_partition_ef_search_is_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="partition_ef_search"):
        HNSWQueryOptions(partition_ef_search=bad)


async def test_hybrid_search_and_a_bot_scope_keep_to_the_value(
    partitioned: tuple[PgVectorStore, list[Document], np.ndarray], pg_dsn: str, embeddings: Any
) -> None:
    store, _, _ = partitioned
    lexemes = partition_index_name(store.table, "tenant", "a", "partl")
    graph = partition_index_name(store.table, "tenant", "a")
    # Both branches read the value's own indexes: its lexemes' and its graph. The graph
    # wins a kNN on cost at any size. The lexemes' index is only cheaper than reading a
    # table this small before the table has statistics, which autovacuum gathers at a
    # moment of its own; so the lexical branch is asked with sequential and plain index
    # scans priced out, leaving a bitmap scan of an index that can serve the value.
    lexical_only = PgVectorStore(
        dsn=pg_dsn,
        table=store.table,
        embedding=embeddings,
        create=False,
        engine_kwargs={
            "connect_args": {
                "server_settings": {"enable_seqscan": "off", "enable_indexscan": "off"}
            }
        },
    )
    question: dict[str, Any] = {
        "query": "leave and pay",
        "limit": 10,
        "filter": {"$and": [{"tenant": "a"}]},
        "search_mode": "hybrid",
    }
    try:
        before = (await _scans(lexical_only, lexemes), await _scans(store, graph))
        for searcher in (lexical_only, store):
            found = await searcher.similarity_search(**question)
            assert found and all(d.metadata["tenant"] == "a" for d in found)
            assert found.filter_plan is not None and found.filter_plan.search == "partition"
        after = (
            await _scans(lexical_only, lexemes, at_least=before[0] + 1),
            await _scans(store, graph, at_least=before[1] + 1),
        )
    finally:
        await lexical_only.close()
    assert after[0] > before[0] and after[1] > before[1]
    bot = Chatbot(parent_searcher=InTableParentSearcher(store=store), scope={"tenant": "1"})
    context, meta = await bot.get_vector_context("leave and pay", filter={"year": 2022})
    assert context
    assert meta["filter_plan"]["search"] == "partition"
    assert meta["filter_plan"]["partition_index"] == partition_index_name(
        store.table, "tenant", "1"
    )


async def test_two_values_scan_their_own_indexes_and_a_search_without_the_key_is_plain(
    partitioned: tuple[PgVectorStore, list[Document], np.ndarray],
) -> None:
    store, docs, vectors = partitioned
    q = vectors[3]
    found = await store.similarity_search_by_vector(
        q.tolist(), limit=5, filter={"tenant": {"$in": ["a", "b"]}}
    )
    assert found.filter_plan is not None and found.filter_plan.search == "partition"
    assert str(found.filter_plan.partition_index).split(", ") == [
        partition_index_name(store.table, "tenant", t) for t in ("a", "b")
    ]
    assert [d.id for d in found] == _exact(docs, vectors, q, lambda m: m["tenant"] in ("a", "b"), 5)
    # With another condition beside the list, the collection's indexes.
    other = await store.similarity_search_by_vector(
        q.tolist(), limit=5, filter={"tenant": {"$in": ["a", "b"]}, "year": 2021}
    )
    assert other.filter_plan is not None and other.filter_plan.search != "partition"
    assert [d.id for d in other] == _exact(
        docs, vectors, q, lambda m: m["tenant"] in ("a", "b") and m["year"] == 2021, 5
    )
    plain = await store.similarity_search_by_vector(q.tolist(), limit=5, filter={"year": 2022})
    assert plain.filter_plan is not None and plain.filter_plan.search != "partition"
    none = await store.similarity_search_by_vector(
        q.tolist(), limit=5, filter={"$and": [{"tenant": "a"}, {"tenant": "b"}]}
    )
    assert list(none) == []


async def test_the_key_is_recorded_checked_and_given_to_an_existing_collection(
    pg_dsn: str, embeddings: Any
) -> None:
    table = unique_table("part")
    docs, vectors = _rows(np.random.default_rng(3))
    plain = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings)
    await plain.add_documents(docs, embeddings=vectors.tolist())
    await plain.close()
    try:
        reader = PgVectorStore(
            dsn=pg_dsn, table=table, embedding=embeddings, create=False, partition_key="tenant"
        )
        with pytest.raises(ConfigurationError, match="no partition key"):
            await reader.connect()
        await reader.close()
        keyed = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings, partition_key="tenant")
        await keyed.connect()
        names = await _index_names(keyed)
        assert {partition_index_name(table, "tenant", t) for t in TENANTS} <= names
        await keyed.close()
        other = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings, partition_key="year")
        with pytest.raises(ConfigurationError, match="partitioned by 'tenant'"):
            await other.connect()
        await other.close()
        opened = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings, create=False)
        await opened.connect()
        assert opened.partition_key == "tenant"
        await opened.close()
    finally:
        await plain.drop()
        await plain.close()


@pytest.mark.parametrize(
    "key", ["", "$tenant", "a\x00b", 7, "k" * 257, "t\ud800", "is_chunk", "document_id"]
)
def test_a_bad_key_is_refused_at_construction(key: Any) -> None:
    with pytest.raises(ConfigurationError, match="partition_key"):
        validate_partition_key(key)
    with pytest.raises(ConfigurationError, match="partition_key"):
        PgVectorStore(dsn="postgresql://u@h/db", table="t", partition_key=key)


_values = st.one_of(st.text(max_size=12), st.integers(-(2**63), 2**63 - 1), st.booleans())


@settings(max_examples=60, deadline=None)
@given(
    st.lists(_values, max_size=20),
    st.from_regex(r"[a-z_][a-z0-9_]{0,62}", fullmatch=True),
)
def test_index_names_never_collide_and_fit_postgresql(values: list[Any], table: str) -> None:
    import json

    distinct = {json.dumps(v) for v in values}
    names = {
        partition_index_name(table, "tenant", v, kind) for v in values for kind in ("part", "partl")
    }
    # Every value gets two names (its graph's and its lexemes'), none shared with another.
    assert len(names) == 2 * len(distinct)
    assert all(len(n.encode()) <= 63 for n in names)


@settings(max_examples=60, deadline=None)
@given(_values, _values)
def test_a_fixed_value_is_found_only_where_every_match_has_it(a: Any, b: Any) -> None:
    assert fixed_value({"tenant": a}, "tenant") == a
    assert fixed_value({"tenant": {"$eq": a}, "year": 1}, "tenant") == a
    assert fixed_value({"$and": [{"year": 1}, {"tenant": a}]}, "tenant") == a
    assert fixed_value({"tenant": {"$in": [a]}}, "tenant") is None
    assert fixed_value({"$or": [{"tenant": a}]}, "tenant") is None
    both = fixed_value({"tenant": a, "$and": [{"tenant": b}]}, "tenant")
    import json

    assert both == (a if json.dumps(a) == json.dumps(b) else None)


async def test_writers_of_new_values_at_once_all_land_with_their_indexes(
    pg_dsn: str, embeddings: Any
) -> None:
    table = unique_table("part")
    first = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings, partition_key="tenant")
    await first.connect()
    docs, vectors = _rows(np.random.default_rng(9))
    writers = [
        PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings, create=False) for _ in range(4)
    ]
    try:

        async def write(k: int, store: PgVectorStore) -> None:
            # Each writer a tenant of its own, new to the collection, and one shared.
            mine = [i for i, d in enumerate(docs) if i % 4 == k]
            batch = [docs[i] for i in mine]
            for d in batch[: len(batch) // 2]:
                d.metadata["tenant"] = f"w{k}"
            await store.add_documents(batch, embeddings=vectors[mine].tolist())

        await asyncio.gather(*(write(k, s) for k, s in enumerate(writers)))
        names = await _index_names(first)
        values = {d.metadata["tenant"] for d in docs}
        for v in values:
            assert partition_index_name(table, "tenant", v) in names
            assert partition_index_name(table, "tenant", v, "partl") in names
        assert await first.count() == len(docs)
    finally:
        for s in writers:
            await s.close()
        await first.drop()
        await first.close()


@contextlib.asynccontextmanager
async def _keyed(
    pg_dsn: str, embeddings: Any, prefix: str, **options: Any
) -> AsyncIterator[PgVectorStore]:
    """A fresh collection partitioned by ``tenant``, dropped after."""
    store = PgVectorStore(
        dsn=pg_dsn,
        table=unique_table(prefix),
        embedding=embeddings,
        partition_key="tenant",
        **options,
    )
    try:
        yield store
    finally:
        await store.drop()
        await store.close()


def _worded_rows(seed: int, rare_every: int = 0) -> list[Document]:
    """120 children of 3 to 11 words of a small vocabulary, tenants ``a`` and ``b`` in
    turn; every ``rare_every``-th (0: none) also holds the rare word ``zqcode``."""
    words = ["leave", "pay", "holiday", "overtime", "pension", "travel", "sick", "bonus"]
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(120):
        picked = list(rng.choice(words, size=int(rng.integers(3, 12))))
        rare = ["zqcode"] if rare_every and i % rare_every == 0 else []
        body = " ".join(picked + rare)
        meta = {"document_id": f"d{i}", "is_chunk": True, "tenant": ["a", "b"][i % 2]}
        meta |= {"start_index": 0, "end_index": len(body)}
        docs.append(Document(id=f"d{i}#c:0-{len(body)}", page_content=body, metadata=meta))
    return docs


async def _through_value_and_filter(store: PgVectorStore, query: str) -> tuple[Any, Any]:
    """The lexical top 10 of tenant ``a``: through the value's indexes, and through the
    same filter written as ``$in`` (which the key does not serve)."""
    fixed = await store.similarity_search(
        query, limit=10, filter={"tenant": "a"}, search_mode="lexical"
    )
    assert fixed.filter_plan is not None and fixed.filter_plan.search == "partition"
    plain = await store.similarity_search(
        query, limit=10, filter={"tenant": {"$in": ["a"]}}, search_mode="lexical"
    )
    return fixed, plain


async def test_a_value_s_lexical_ranking_on_pg_textsearch_is_the_sql_ranking_of_its_filter(
    pg_dsn: str, embeddings: Any
) -> None:
    # The value's GIN index and the collection's SQL statistics rank its children, as
    # any filter's exact ranking does; the collection's bm25 index ranks every tenant's
    # children first and keeps the value's after, with statistics of its own.
    async with _keyed(pg_dsn, embeddings, "partbm", lexical_backend="pg_textsearch") as store:
        await store.add_documents(_worded_rows(5))
        query = "overtime pay and pension"
        fixed, plain = await _through_value_and_filter(store, query)
        assert [(d.id, d.lexical_score) for d in fixed] == [(d.id, d.lexical_score) for d in plain]
        bot = Chatbot(parent_searcher=InTableParentSearcher(store=store))
        _, meta = await bot.get_vector_context(query, filter={"tenant": "a"})
        assert meta["filter_plan"]["search"] == "partition"
        assert meta["lexical"]["backend"] == "sql"


async def test_a_value_as_small_as_an_exactly_ranked_collection_gets_exact_lexical_ranking(
    pg_dsn: str, embeddings: Any
) -> None:
    # The candidate rule bounds the lexical branch by the collection's size; a value's
    # children are as few as a collection the rule ranks exactly, so they are ranked
    # exactly, as the same filter without the key ranks them.
    async with _keyed(pg_dsn, embeddings, "partfew") as store:
        store.lexical_candidates = CandidateRule(budget=5, pairs=0, pair_budget=0, exact_below=100)
        await store.add_documents(_worded_rows(7, rare_every=10))
        # The value's row count is the catalog's, as after autovacuum.
        async with store.engine.connect() as conn:
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await auto.execute(text(f'VACUUM ANALYZE "{store.table}"'))
        query = "zqcode pension"
        fixed, plain = await _through_value_and_filter(store, query)
        assert len(plain) == 10
        assert [(d.id, d.lexical_score) for d in fixed] == [(d.id, d.lexical_score) for d in plain]
        # A value larger than the rule's bound keeps the bounded rule (scaled to it).
        store.lexical_candidates = replace(store.lexical_candidates, exact_below=50)
        bounded = await store.similarity_search(
            query, limit=10, filter={"tenant": "a"}, search_mode="lexical"
        )
        assert len(bounded) < len(plain)


async def test_a_loader_keeps_a_document_in_its_partition_value_unless_it_had_none(
    pg_dsn: str, embeddings: Any
) -> None:
    from parrot_parents.loaders.text import TextLoader

    def doc(tenant: Any = None) -> Document:
        meta = {"document_id": "pay"} | ({} if tenant is None else {"tenant": tenant})
        return Document(page_content="Salaries are paid on the 25th.", metadata=meta)

    async with _keyed(pg_dsn, embeddings, "partmv") as store:

        async def ingest(*docs: Document) -> dict[str, str]:
            loader = TextLoader(embedding=embeddings)
            await loader.chunk_documents(list(docs), vector_store=store)
            return loader.report.failed

        async def tenants() -> set[Any]:
            rows = await store.similarity_search("salaries", limit=5, search_mode="lexical")
            return {r.metadata.get("tenant", "none") for r in rows}

        assert await ingest(doc()) == {}
        assert await ingest(doc("acme")) == {}  # given a value it had not
        assert await tenants() == {"acme"}
        for other, given in (
            ("globex", "tenant 'globex'"),
            (None, "no value of tenant"),
            (1, "tenant 1"),
            (True, "tenant True"),
        ):
            failed = await ingest(doc(other))
            assert list(failed) == ["pay"] and "stored under tenant 'acme'" in failed["pay"]
            assert f"this write gives it {given} (not written)" in failed["pay"]
            assert await tenants() == {"acme"}
        # Told apart as JSON tells them apart: true is not 1.
        await store.delete("pay")
        assert await ingest(doc(1)) == {}
        assert await ingest(doc(True)) != {}
        assert await tenants() == {1}
        # Two values of one new document in one call: the first is written.
        await store.delete("pay")
        assert list(await ingest(doc("acme"), doc("globex"))) == ["pay"]
        assert await tenants() == {"acme"}
        # The store checks again in the write's transaction, after the document's lock:
        # a writer that read no stored value (as a concurrent one may) is refused there.
        moved = doc("globex")
        record = DocumentRecord(
            "pay", "h", None, moved.page_content, None, {"row_metadata": moved.metadata}
        )
        with pytest.raises(ConfigurationError, match="stored under tenant 'acme'"):
            await store.replace_document("pay", [moved], record=record)
        assert await tenants() == {"acme"}
        # Two loaders at once: one of them is refused, whichever comes second.
        await store.delete("pay")
        both = await asyncio.gather(ingest(doc("acme")), ingest(doc("globex")))
        assert sorted(len(failed) for failed in both) == [0, 1]


async def test_the_same_content_under_another_value_is_not_called_a_copy(
    pg_dsn: str, embeddings: Any
) -> None:
    from parrot_parents.loaders.text import TextLoader

    text = "Salaries are paid on the 25th. Overtime is paid in the next cycle."

    async with _keyed(pg_dsn, embeddings, "partcp") as store:

        async def warnings(document_id: str, tenant: str) -> list[str]:
            loader = TextLoader(embedding=embeddings)
            meta = {"document_id": document_id, "source": f"{document_id}.txt", "tenant": tenant}
            await loader.chunk_documents([Document(text, metadata=meta)], vector_store=store)
            return [w for ws in loader.report.warnings.values() for w in ws]

        assert await warnings("acme/pay", "acme") == []
        # Another tenant's identical file is its own document: no warning naming acme's.
        assert await warnings("globex/pay", "globex") == []
        # A second copy within one tenant is still named.
        again = await warnings("acme/pay-copy", "acme")
        assert any("same content is already stored" in w and "acme/pay" in w for w in again)
