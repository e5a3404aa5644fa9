"""One round trip per query, counted on the wire.

A proxy between the store and PostgreSQL counts the messages that end a round trip
(:mod:`tests.stores.wire`): ``BEGIN``, ``COMMIT``, ``set_config``, a ping and the search
each count one. The counts are taken after a first call that prepares the statement and
sets the session's HNSW settings; calls one after the other run on the read pool's most
recently used connection, so the count does not depend on which connection answers.

The EXPLAIN test runs the store's own search statement with the settings the store sets,
at every ``ef_search`` a user may configure, on a table small enough that the planner
would prefer a full scan without those settings (37 ms against 6.5 ms at 10k rows).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.loaders import TextLoader
from parrot_parents.rerankers import AbstractReranker
from parrot_parents.stores.parents.in_table import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.connections.prepared import Prepared
from parrot_parents.stores.postgres.connections.reads import read
from parrot_parents.stores.postgres.search.bm25_index import bm25_index_name
from parrot_parents.stores.postgres.search.request import SearchRequest
from parrot_parents.stores.search_options import HNSWQueryOptions
from tests.conftest import unique_table, write_at_once
from tests.stores.wire import RoundTripProxy

DOC = "\n\n".join(
    f"Section {i}. The {w} policy says employees may claim {w} costs up to {i * 10} euros. "
    f"Claims for {w} need a receipt and the approval of a manager within {i} days."
    for i, w in enumerate(["travel", "meal", "phone", "training", "parking", "book"] * 2)
)


@pytest.fixture(scope="module")
def policy_table(pg_dsn: str, embeddings) -> Iterator[str]:
    """The policy document ingested once for the module (read only); its collection."""
    table = unique_table("rt")

    async def build() -> None:
        async with PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings) as store:
            await TextLoader(child_chunk_size=120, embedding=embeddings).chunk_documents(
                [Document(page_content=DOC, metadata={"document_id": "policy"})],
                vector_store=store,
                parent_chunk_threshold_tokens=800,
                parent_chunk_size_tokens=800,
                parent_chunk_overlap_tokens=0,
            )

    async def drop() -> None:
        async with PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings) as store:
            await store.drop()

    asyncio.run(build())
    yield table
    asyncio.run(drop())


@pytest.fixture
async def counted(
    pg_dsn: str, embeddings, policy_table: str
) -> AsyncIterator[tuple[PgVectorStore, RoundTripProxy]]:
    """A store of its own on the policy collection, whose traffic, on its engine and on its
    read pool, is counted."""
    proxy = RoundTripProxy(pg_dsn)
    store = PgVectorStore(dsn=await proxy.start(), table=policy_table, embedding=embeddings)
    await store.connect()
    try:
        yield store, proxy
    finally:
        await store.close()
        await proxy.stop()


class Reversing(AbstractReranker):
    """Scores candidates in reverse search order (a real reranker needs a model)."""

    type_name = "reversing"

    @property
    def model_name(self) -> str:
        return "reversing"

    async def score(self, query: str, documents: Any) -> list[float]:
        return [float(i) for i in range(len(documents))]

    def to_dict(self) -> dict[str, Any]:
        return {"type": "reversing"}


def _give(store: PgVectorStore, vector: list[float]) -> None:
    """The question's vector, computed once: the round trips counted are the database's."""

    model = store.embedding

    class Given:
        # The same model in every other respect, so the collection's model check passes.
        def __getattr__(self, name: str) -> Any:
            return getattr(model, name)

        async def aembed_query(self, text: str) -> list[float]:
            return vector

    store.embedding = Given()  # type: ignore[assignment]


async def _count(proxy: RoundTripProxy, call: Any) -> tuple[Any, list[str]]:
    await call()  # prepares the statement, sets the session once
    proxy.reset()
    result = await call()
    return result, list(proxy.kinds)


@pytest.mark.parametrize("mode", ["parent", "window:1", "auto_merge:0.1"])
@pytest.mark.parametrize("search_mode", ["dense", "hybrid"])
async def test_retrieval_with_expansion_is_one_round_trip(
    counted: tuple[PgVectorStore, RoundTripProxy], embeddings, mode: str, search_mode: str
) -> None:
    store, proxy = counted
    vector = await embeddings.aembed_query("How long do I have to claim phone costs?")

    _give(store, vector)
    bot = Chatbot(store=store, parent_searcher=InTableParentSearcher(store=store))
    options = {"expand_to_parent": True, "mode": mode, "limit": 4, "search_mode": search_mode}
    retrieval, queries = await _count(
        proxy, lambda: bot.retrieve("How long do I have to claim phone costs?", **options)
    )
    assert retrieval.meta["expanded"] is True and not retrieval.meta["fallbacks"]
    assert len(queries) == 1, queries


async def test_similarity_search_is_one_round_trip(
    counted: tuple[PgVectorStore, RoundTripProxy], embeddings
) -> None:
    store, proxy = counted
    vector = await embeddings.aembed_query("phone costs")
    results, queries = await _count(
        proxy, lambda: store.similarity_search_by_vector(vector, limit=3)
    )
    assert len(results) == 3
    assert len(queries) == 1, queries


async def test_a_filtered_search_is_its_estimate_and_its_ranking(
    counted: tuple[PgVectorStore, RoundTripProxy], embeddings
) -> None:
    # A filter's values are bound, so its statements are prepared once, whatever the values.
    store, proxy = counted
    vector = await embeddings.aembed_query("phone costs")
    await store.similarity_search_by_vector(vector, limit=3, filter={"document_id": "other"})
    results, queries = await _count(
        proxy,
        lambda: store.similarity_search_by_vector(
            vector, limit=3, filter={"document_id": "policy"}
        ),
    )
    assert len(results) == 3 and results[0].filter_plan is not None
    assert queries == ["S", "S"], queries


@pytest.mark.parametrize("mode", ["parent", "window:1", "auto_merge:0.1"])
async def test_a_scoped_bot_judges_its_expansion_in_its_search(
    counted: tuple[PgVectorStore, RoundTripProxy], embeddings, mode: str
) -> None:
    # The scope's check of the parents and children expansion hands over is read with the
    # search: a scoped retrieval is the filtered search's estimate and ranking alone.
    store, proxy = counted
    vector = await embeddings.aembed_query("How long do I have to claim phone costs?")

    _give(store, vector)
    bot = Chatbot(
        store=store,
        parent_searcher=InTableParentSearcher(store=store),
        scope={"document_id": "policy"},
    )
    options = {"expand_to_parent": True, "mode": mode, "limit": 4}
    retrieval, queries = await _count(
        proxy, lambda: bot.retrieve("How long do I have to claim phone costs?", **options)
    )
    assert retrieval.meta["expanded"] is True and not retrieval.meta["fallbacks"]
    assert retrieval.meta["scope"]["withheld"] == []
    assert queries == ["S", "S"], queries


async def test_bots_scoped_to_different_values_share_their_statements(
    counted: tuple[PgVectorStore, RoundTripProxy], embeddings
) -> None:
    # A scope's values are parameters of the statement that judges it, as a filter's are:
    # a bot per tenant adds no statement of its own, and each keeps to its own value.
    store, _ = counted
    question = "How long do I have to claim phone costs?"
    _give(store, await embeddings.aembed_query(question))

    def bot(document_id: str) -> Chatbot:
        return Chatbot(
            store=store,
            parent_searcher=InTableParentSearcher(store=store),
            scope={"document_id": document_id},
        )

    found = await bot("policy").retrieve(question, expand_to_parent=True, limit=4)
    assert found.passages and found.meta["expanded"] is True
    statements = dict(store.searcher._statements)
    other = await bot("another").retrieve(question, expand_to_parent=True, limit=4)
    assert other.passages == []
    assert dict(store.searcher._statements).keys() == statements.keys()


async def test_after_a_reranker_the_parents_are_one_more_statement(
    counted: tuple[PgVectorStore, RoundTripProxy], embeddings
) -> None:
    store, proxy = counted
    vector = await embeddings.aembed_query("receipt approval")

    _give(store, vector)
    bot = Chatbot(
        store=store,
        parent_searcher=InTableParentSearcher(store=store),
        reranker=Reversing(),
        rerank_candidates=6,
    )
    retrieval, queries = await _count(
        proxy, lambda: bot.retrieve("receipt approval", expand_to_parent=True, limit=2)
    )
    assert retrieval.meta["reranked"] is True and retrieval.meta["expanded"] is True
    assert len(queries) == 2, queries


def _index_names(plan: Any) -> set[str]:
    found: set[str] = set()
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "Index Name" in node:
                found.add(node["Index Name"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


@pytest.fixture(scope="module")
def random_table(pg_dsn: str) -> Iterator[str]:
    """3,000 random unit vectors, analysed, built once for the module (read only)."""
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((3000, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    table = unique_table("plan")
    docs = [
        Document(
            page_content=f"row {i}",
            metadata={"document_id": f"d{i // 10}", "is_chunk": True, "chunk_index": i % 10},
        )
        for i in range(len(vectors))
    ]

    async def build() -> None:
        async with _plan_store(pg_dsn, table) as store:
            await write_at_once(store, docs, list(vectors))
            engine, _ = await store.ready()
            async with engine.begin() as conn:
                await conn.exec_driver_sql(f"ANALYZE {store.qualified_name}")

    async def drop() -> None:
        async with _plan_store(pg_dsn, table) as store:
            await store.drop()

    asyncio.run(build())
    yield table
    asyncio.run(drop())


def _plan_store(pg_dsn: str, table: str) -> PgVectorStore:
    # pg_textsearch asked for by name: the hybrid plan below must use its index.
    return PgVectorStore(dsn=pg_dsn, table=table, dimension=384, lexical_backend="pg_textsearch")


@pytest.fixture
async def random_rows(pg_dsn: str, random_table: str) -> AsyncIterator[PgVectorStore]:
    """A store of its own (its own connections and prepared statements) on the table."""
    store = _plan_store(pg_dsn, random_table)
    try:
        yield store
    finally:
        await store.close()


async def test_the_planner_keeps_the_hnsw_index_at_every_ef_search(
    random_rows: PgVectorStore,
) -> None:
    store = random_rows
    engine, table = await store.ready()
    from parrot_parents.stores.postgres.search.context_sql import search_with_context

    query = np.random.default_rng(1).standard_normal(384).astype(np.float32)
    index = f"{store.table[:40]}_embedding_hnsw"
    for search_mode in ("dense", "hybrid"):
        request = SearchRequest.build(
            mode=search_mode, limit=10, dimension=384, vector=query, text="row"
        )
        ranked = store.searcher.statement(table, request)
        # The SQL exactly as the store sends it (constants inline).
        prepared = Prepared.compile(search_with_context(table, ranked, None), engine.dialect)
        args = prepared.args({"query_vector": query, "lexical_query": "row"})

        async def explain(conn: Any, sql: str = prepared.sql, bound: list = args) -> Any:
            raw = (await conn.get_raw_connection()).driver_connection
            plan = await raw.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *bound)
            return json.loads(plan) if isinstance(plan, str) else plan

        for ef_search in (40, 100, 200, 400, 1000):
            store.search_options = HNSWQueryOptions(ef_search=ef_search)
            settings = store.searcher.settings(request)
            plan = await read(engine, "explain", explain, settings)
            assert index in _index_names(plan), (search_mode, ef_search, json.dumps(plan)[:1500])
            if search_mode == "hybrid":
                # The lexical branch is the bm25 index's own top-k, not a scan.
                assert store.lexical_backend == "pg_textsearch"
                assert bm25_index_name(store.table) in _index_names(plan), json.dumps(plan)[:1500]


async def _plans(store: PgVectorStore) -> tuple[int, int]:
    """(generic, custom) plans of the store's search statement, on the read pool's
    connection that served the searches (the most recently used one)."""
    await store.ready()

    async def count(conn: Any) -> Any:
        return await conn.fetchrow(
            "SELECT sum(generic_plans)::int AS g, sum(custom_plans)::int AS c"
            " FROM pg_prepared_statements WHERE strpos(statement, $1) > 0"
            " AND strpos(statement, 'hits AS') > 0",
            store.qualified_name,
        )

    row = await store.read_pool.run(count)
    return row["g"] or 0, row["c"] or 0


@pytest.mark.parametrize("search_mode", ["dense", "hybrid"])
async def test_a_repeated_search_reuses_its_plan(
    random_rows: PgVectorStore, search_mode: str
) -> None:
    """With the LIMIT and the markers bound as parameters, PostgreSQL costs the generic
    plan for an unknown row count and plans every execution again (0.26 ms of planning
    beside 0.37 ms of execution at 100k rows). With the constants inline, after its five
    custom plans the server reuses one generic plan."""
    store = random_rows
    query = np.random.default_rng(2).standard_normal(384).astype(np.float32)
    for _ in range(10):
        await store.similarity_search_by_vector(
            query, limit=10, search_mode=search_mode, query="row 7"
        )
    generic, custom = await _plans(store)
    assert custom <= 5 and generic >= 5, (generic, custom)
