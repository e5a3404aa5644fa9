"""Filtered search that plans (:mod:`parrot_parents.stores.postgres.search.filter_plan`): exact
over the
children a selective filter keeps, the HNSW index for a broad one, an exact ranking after
an index scan that came back short; the plan in ``meta``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.search import filter_plan
from parrot_parents.stores.postgres.search.filter_plan import (
    THRESHOLD_AT,
    FilterPlan,
    scan_ceiling,
    threshold,
)
from parrot_parents.stores.postgres.search.planning import DOUBT
from parrot_parents.stores.results import SearchResults
from parrot_parents.stores.search_options import HNSWQueryOptions
from tests.conftest import analysed_collection, unique_table, write_at_once

N = 1200
RARE, COMMON = "rare", "common"
BUCKETS = 97  # about 12 children each


def _tenant(i: int) -> str:
    return RARE if i % 40 == 0 else COMMON  # 30 rare children, 1,170 common


def _id(i: int) -> str:
    return f"d{i}#c:0-10"


@pytest.fixture(scope="module")
def tenants(pg_dsn: str, embeddings: Any) -> Iterator[tuple[str, np.ndarray]]:
    """A collection of random unit vectors, two tenants, analysed: ``(table, vectors)``;
    built once for the module (on its own event loop), dropped after."""
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((N, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    docs = [
        Document(
            id=_id(i),
            page_content=f"row {i} about tenant {_tenant(i)}",
            metadata={
                "document_id": f"d{i}",
                "is_chunk": True,
                "start_index": 0,
                "end_index": 10,
                "tenant": _tenant(i),
                "bucket": i % BUCKETS,
            },
        )
        for i in range(N)
    ]

    with analysed_collection(pg_dsn, embeddings, "fp", docs, list(vectors)) as table:
        yield table, vectors


@pytest.fixture
async def open_store(
    pg_dsn: str, embeddings: Any, tenants: tuple[str, np.ndarray]
) -> AsyncIterator[Any]:
    """``open_store(**search_options)``: the tenants' collection, opened with those HNSW
    query options; closed after the test."""
    opened: list[PgVectorStore] = []

    async def make(**options: Any) -> PgVectorStore:
        store = PgVectorStore(
            dsn=pg_dsn,
            table=tenants[0],
            embedding=embeddings,
            search_options=HNSWQueryOptions(**options),
        )
        opened.append(store)
        return await store.connect()

    yield make
    for s in opened:
        await s.close()


def _exact(vectors: np.ndarray, query: np.ndarray, tenant: str, k: int) -> list[str]:
    keep = [i for i in range(N) if _tenant(i) == tenant]
    order = sorted(keep, key=lambda i: (-float(vectors[i] @ query), i))
    return [_id(i) for i in order[:k]]


def _query(seed: int) -> np.ndarray:
    q = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return q / np.linalg.norm(q)


async def test_a_selective_filter_is_ranked_exactly_and_meta_says_so(
    open_store: Any, tenants: tuple[str, np.ndarray]
) -> None:
    store = await open_store()
    for seed in range(3):
        q = _query(seed)
        got = await store.similarity_search_by_vector(q, limit=10, filter={"tenant": RARE})
        assert [r.id for r in got] == _exact(tenants[1], q, RARE, 10)
        plans = {r.filter_plan for r in got}
        assert len(plans) == 1
        plan = plans.pop()
        assert plan is not None and plan.search == "exact" and plan.estimate < 4000
        assert abs(plan.children - N) < N / 10  # the planner's count of the children
    assert all(r.filter_plan is None for r in await store.similarity_search_by_vector(q, 5))
    bot = Chatbot(store=store)
    meta = (await bot.retrieve("row about tenant", filter={"tenant": RARE})).meta
    assert meta.filter_plan is not None and meta.filter_plan["search"] == "exact"
    assert meta.to_dict()["filter_plan"] == meta.filter_plan
    assert (await bot.retrieve("row about tenant")).meta.filter_plan is None


async def test_a_filter_that_keeps_nothing_still_reports_its_plan(open_store: Any) -> None:
    store = await open_store()
    nobody = {"tenant": "nobody"}
    for mode in ("dense", "hybrid", "lexical"):
        got = await store.similarity_search("row about tenant", filter=nobody, search_mode=mode)
        assert got == [] and isinstance(got, SearchResults)
        assert got.filter_plan is not None and got.filter_plan.search == "exact", mode
        meta = (await Chatbot(store=store).retrieve("row", filter=nobody, search_mode=mode)).meta
        assert meta.passages == 0 and meta.filter_plan == got.filter_plan.to_dict(), mode


async def test_a_broad_filter_takes_the_index_in_dense_and_hybrid_mode(
    open_store: Any, tenants: tuple[str, np.ndarray]
) -> None:
    # The threshold below this small collection's common tenant: the index plan.
    store = await open_store(filter_exact_below=100)
    q = _query(5)
    exact = _exact(tenants[1], q, COMMON, 10)
    for mode in ("dense", "hybrid"):
        got = await store.similarity_search_by_vector(
            q, limit=10, filter={"tenant": COMMON}, search_mode=mode, query="row tenant"
        )
        plan = got[0].filter_plan
        assert plan is not None and plan.search == "index" and plan.estimate > 100
        assert len(got) == 10 and all(r.metadata["tenant"] == COMMON for r in got)
        if mode == "dense":
            # HNSW is approximate; on 1,200 rows at the default ef_search it finds them.
            assert len({r.id for r in got} & set(exact)) >= 9
    lexical = await store.similarity_search(
        "row tenant", limit=5, filter={"tenant": COMMON}, search_mode="lexical"
    )
    assert len(lexical) == 5 and all(r.metadata["tenant"] == COMMON for r in lexical)
    assert lexical[0].filter_plan is not None and lexical[0].filter_plan.search == "index"


async def test_an_index_scan_that_comes_back_short_is_ranked_exactly_after_it(
    open_store: Any, tenants: tuple[str, np.ndarray]
) -> None:
    # Every filter to the index first, and a scan that stops after its first 40
    # candidates (about one rare child among them): without the exact ranking after it,
    # fewer than 10 of the 30 rare children come back.
    store = await open_store(filter_exact_below=0, iterative_scan="off")
    for seed in range(3):
        q = _query(100 + seed)
        got = await store.similarity_search_by_vector(q, limit=10, filter={"tenant": RARE})
        assert [r.id for r in got] == _exact(tenants[1], q, RARE, 10)
        assert got[0].filter_plan is not None
        assert got[0].filter_plan.search == "index, then exact"


async def test_a_range_the_planner_cannot_estimate_is_counted_on_a_sample(
    open_store: Any, tenants: tuple[str, np.ndarray]
) -> None:
    # The planner has no statistics for a range on a metadata key and takes it to keep a
    # few rows; a sample of the table counts it (all of this small one: exact counts).
    # (The scan's bound is set so that its ceiling does not hide the threshold here.)
    store = await open_store(filter_exact_below=50, max_scan_tuples=400)
    q = _query(21)
    everyone = {"bucket": {"$gte": 0}}
    for mode in ("dense", "hybrid", "lexical"):
        got = await store.similarity_search_by_vector(
            q, limit=10, filter=everyone, search_mode=mode, query="row tenant"
        )
        assert got.filter_plan is not None, mode
        assert got.filter_plan.sampled and got.filter_plan.estimate == N, got.filter_plan
        assert got.filter_plan.search == "index" and len(got) == 10, (mode, got.filter_plan)
    # A range that does keep few children is ranked exactly, over every one of them.
    few = {"$or": [{"bucket": {"$gte": 93}}, {"tenant": "nobody"}]}
    keep = [i for i in range(N) if i % BUCKETS >= 93]
    got = await store.similarity_search_by_vector(q, limit=10, filter=few)
    plan = got.filter_plan
    assert plan is not None and plan.sampled and plan.estimate == len(keep) <= 50, plan
    assert plan.search == "exact"
    order = sorted(keep, key=lambda i: (-float(tenants[1][i] @ q), i))
    assert [r.id for r in got] == [_id(i) for i in order[:10]]
    # A filter the planner estimates is not sampled, nor a range ANDed with conditions
    # it estimates to keep few enough on their own (what they keep bounds the filter).
    rare = await store.similarity_search_by_vector(q, limit=10, filter={"tenant": RARE})
    assert rare.filter_plan is not None and not rare.filter_plan.sampled
    assert rare.filter_plan.estimate < N / 2
    store = await open_store(
        filter_exact_below=max(50, rare.filter_plan.estimate), max_scan_tuples=400
    )
    bounded = {"tenant": RARE, "bucket": {"$gte": 50}}
    got = await store.similarity_search_by_vector(q, limit=10, filter=bounded)
    assert got.filter_plan is not None and not got.filter_plan.sampled
    assert got.filter_plan.search == "exact"
    keep = [i for i in range(N) if _tenant(i) == RARE and i % BUCKETS >= 50]
    order = sorted(keep, key=lambda i: (-float(tenants[1][i] @ q), i))
    assert [r.id for r in got] == [_id(i) for i in order[:10]]
    # The common tenant does not bound the range: counted on the sample.
    common = {"tenant": COMMON, "bucket": {"$gte": 93}}
    got = await store.similarity_search_by_vector(q, limit=10, filter=common)
    assert got.filter_plan is not None and got.filter_plan.sampled
    assert got.filter_plan.search == "exact"


async def test_a_range_nothing_bounds_goes_through_the_index_where_its_scan_finds_enough(
    open_store: Any, tenants: tuple[str, np.ndarray]
) -> None:
    # Its exact ranking would read the whole table: where the HNSW scan is expected to
    # meet enough of its children within its bound, the index ranks it, below the
    # threshold too (the threshold shown is the ceiling that decided).
    store = await open_store(filter_exact_below=50)
    q = _query(23)
    few = {"bucket": {"$gte": 93}}  # 48 children, under the threshold of 50
    keep = [i for i in range(N) if i % BUCKETS >= 93]
    ceiling = scan_ceiling(N, 10, 20000)
    assert ceiling < len(keep) <= 50
    got = await store.similarity_search_by_vector(q, limit=10, filter=few)
    plan = got.filter_plan
    assert plan is not None and plan.sampled and plan.estimate == len(keep), plan
    assert plan.search in ("index", "index, then exact") and plan.exact_below == ceiling, plan
    assert len(got) == 10 and {r.id for r in got} <= {_id(i) for i in keep}
    hybrid = await store.similarity_search_by_vector(
        q, limit=10, filter=few, search_mode="hybrid", query="row tenant"
    )
    assert hybrid.filter_plan is not None and hybrid.filter_plan.search.startswith("index")
    # Lexical search alone reads the children holding a query lexeme, never the table:
    # the threshold stands.
    lexical = await store.similarity_search_by_vector(
        None, limit=10, filter=few, search_mode="lexical", query="row tenant"
    )
    assert lexical.filter_plan is not None and lexical.filter_plan.search == "exact"
    assert lexical.filter_plan.exact_below == 50
    # A collection no larger than the threshold is read whole by any exact ranking: no
    # ceiling.
    roomy = await open_store(filter_exact_below=N)
    got = await roomy.similarity_search_by_vector(q, limit=10, filter=few)
    assert got.filter_plan is not None and got.filter_plan.search == "exact"
    order = sorted(keep, key=lambda i: (-float(tenants[1][i] @ q), i))
    assert [r.id for r in got] == [_id(i) for i in order[:10]]


def test_the_scan_ceiling_grows_with_the_collection_and_the_limit() -> None:
    assert scan_ceiling(100_000, 10, 20_000) == 200
    assert scan_ceiling(1_000_000, 10, 20_000) == 2_000
    assert scan_ceiling(100_000, 20, 20_000) == 400
    assert scan_ceiling(100_000, 10, 40_000) == 100
    plan = FilterPlan.for_estimate(1_500, 100_000, 4_000, sampled=True, ceiling=200)
    assert (plan.search, plan.exact_below) == ("index", 200)
    plan = FilterPlan.for_estimate(150, 100_000, 4_000, sampled=True, ceiling=200)
    assert (plan.search, plan.exact_below) == ("exact", 200)


async def test_a_broad_filter_the_estimate_takes_for_a_selective_one_is_read_no_further(
    open_store: Any, tenants: tuple[str, np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A sample that holds no child leaves the planner's guess, a few rows, for a filter
    # that keeps every child. The exact attempt reads no more than the threshold's rows,
    # finds the filter keeps more, and the index ranks.
    monkeypatch.setattr(filter_plan, "SAMPLE_ROWS", 0)
    store = await open_store(filter_exact_below=50)
    q = _query(22)
    everyone = {"bucket": {"$gte": 0}}
    for mode in ("dense", "hybrid"):
        got = await store.similarity_search_by_vector(
            q, limit=10, filter=everyone, search_mode=mode, query="row tenant"
        )
        plan = got.filter_plan
        assert plan is not None and plan.estimate <= 50 and not plan.sampled, plan
        assert plan.search == "exact, then index", (mode, plan)
        assert len(got) == 10
        if mode == "dense":
            every = sorted(range(N), key=lambda i: (-float(tenants[1][i] @ q), i))
            assert len({r.id for r in got} & {_id(i) for i in every[:10]}) >= 9
    # Lexical search alone reads the children holding a query lexeme, not the kept rows:
    # its exact plan has no cap to reach.
    lexical = await store.similarity_search(
        "row tenant", limit=5, filter=everyone, search_mode="lexical"
    )
    assert len(lexical) == 5 and lexical.filter_plan is not None
    assert lexical.filter_plan.search == "exact"


def test_a_plan_names_each_search_it_ran_in_order() -> None:
    plan = FilterPlan.for_estimate(10, 1000, 50)
    assert plan.search == "exact" and plan.exact
    assert plan.then_index().search == "exact, then index" and not plan.then_index().exact
    assert plan.then_index().then_exact().search == "exact, then index, then exact"
    assert plan.then_index().then_exact().exact
    broad = FilterPlan.for_estimate(100, 1000, 50)
    assert broad.search == "index" and not broad.exact
    assert broad.then_exact().search == "index, then exact" and broad.then_exact().exact


async def test_each_filter_is_planned_and_ranked_with_its_own_values(
    open_store: Any, tenants: tuple[str, np.ndarray]
) -> None:
    # One statement serves every filter of one structure, its values bound at each run:
    # the planner's estimate follows the value, and so does the answer.
    store = await open_store()
    q = _query(11)
    estimates = {}
    for tenant in (RARE, COMMON, RARE):
        got = await store.similarity_search_by_vector(q, limit=10, filter={"tenant": tenant})
        assert [r.id for r in got] == _exact(tenants[1], q, tenant, 10)
        assert got[0].filter_plan is not None
        estimates[tenant] = got[0].filter_plan.estimate
    assert estimates[RARE] < estimates[COMMON], estimates


async def test_a_filtered_search_leaves_the_session_as_an_unfiltered_one_needs_it(
    open_store: Any,
) -> None:
    # The index plan turns scans off on the read pool's connection; the next search on
    # that connection, unfiltered and hybrid here, has them back, and no parallel workers.
    store = await open_store(filter_exact_below=100)
    names = ("enable_bitmapscan", "plan_cache_mode", "max_parallel_workers_per_gather")

    async def session() -> dict[str, str]:
        async def show(conn: Any) -> dict[str, str]:
            return {n: await conn.fetchval(f"SELECT current_setting('{n}')") for n in names}

        return await store.read_pool.run(show)

    workers = await store.read_pool.run(
        lambda conn: conn.fetchval(
            "SELECT reset_val FROM pg_settings WHERE name = 'max_parallel_workers_per_gather'"
        )
    )
    q = _query(12)
    got = await store.similarity_search_by_vector(q, limit=10, filter={"tenant": COMMON})
    assert got[0].filter_plan is not None and got[0].filter_plan.search == "index"
    # The same connection (the pool hands out its most recent one): the plan's settings.
    assert await session() == {
        "enable_bitmapscan": "off",
        "plan_cache_mode": "force_custom_plan",
        "max_parallel_workers_per_gather": workers,
    }
    hybrid = await store.similarity_search_by_vector(
        q, limit=10, search_mode="hybrid", query="row tenant"
    )
    assert len(hybrid) == 10
    assert await session() == {
        "enable_bitmapscan": "on",
        "plan_cache_mode": "auto",
        "max_parallel_workers_per_gather": "0",
    }


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    buckets=st.sets(st.integers(0, BUCKETS - 1), max_size=6) | st.integers(0, BUCKETS),
    limit=st.integers(1, 40),
    below=st.sampled_from([0, 50, 4000]),
    scan=st.sampled_from(["relaxed_order", "strict_order", "off"]),
    seed=st.integers(0, 2**16),
)
# The index first, a scan that stops after ef_search candidates: the exact ranking after it.
@example(buckets={3}, limit=10, below=0, scan="off", seed=1)
@example(buckets={3, 50}, limit=40, below=0, scan="strict_order", seed=2)
@example(buckets={3, 50}, limit=40, below=0, scan="relaxed_order", seed=2)
@example(buckets=set(), limit=5, below=4000, scan="strict_order", seed=3)
# A range the planner cannot estimate, keeping every child: the exact attempt's cap.
@example(buckets=0, limit=10, below=50, scan="strict_order", seed=4)
async def test_a_filtered_search_loses_nothing_whatever_its_plan(
    open_store: Any,
    tenants: tuple[str, np.ndarray],
    buckets: set[int] | int,
    limit: int,
    below: int,
    scan: str,
    seed: int,
) -> None:
    # Every plan returns min(limit, children the filter keeps) children, all kept by the
    # filter, nearest first (a relaxed scan's rows too); an exact ranking returns the
    # exact top ``limit``. ``buckets``: a set of
    # buckets (``$in``, which the planner estimates), or the lowest bucket kept (``$gte``,
    # which it guesses).
    store = await open_store(filter_exact_below=below, iterative_scan=scan)
    q = _query(seed)
    if isinstance(buckets, int):
        flt: dict[str, Any] = {"bucket": {"$gte": buckets}}
        kept = set(range(buckets, BUCKETS))
    else:
        flt, kept = {"bucket": {"$in": sorted(buckets)}}, buckets
    got = await store.similarity_search_by_vector(q, limit=limit, filter=flt)
    keep = [i for i in range(N) if i % BUCKETS in kept]
    assert len(got) == min(limit, len(keep))
    assert all(r.metadata["bucket"] in kept for r in got)
    distances = [r.distance for r in got]
    assert distances == sorted(distances)
    if got and got[0].filter_plan is not None and got[0].filter_plan.exact:
        order = sorted(keep, key=lambda i: (-float(tenants[1][i] @ q), i))
        assert [r.id for r in got] == [_id(i) for i in order[:limit]]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "10"])
def test_the_threshold_must_be_a_count(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="filter_exact_below"):
        HNSWQueryOptions(filter_exact_below=bad)


@settings(max_examples=50, deadline=None)
@given(below=st.integers(0, 10**5), children=st.integers(0, 10**9), more=st.integers(0, 10**9))
def test_the_threshold_grows_with_the_collection_and_never_drops_below_its_setting(
    below: int, children: int, more: int
) -> None:
    assert threshold(below, children) >= below
    assert threshold(below, children + more) >= threshold(below, children)
    if children <= THRESHOLD_AT:
        assert threshold(below, children) == below


def test_the_threshold_at_a_million_children_takes_a_one_percent_filter_exactly() -> None:
    # The measured crossing at 1M (docs/performance.md): 1 % (about 10,000) exact,
    # 3 % (about 30,000) through the index.
    assert 10_000 < threshold(4000, 1_000_000) < 30_000


def _nodes(plan: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    stack = [plan]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "Node Type" in node:
                found.append(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


async def test_an_exact_hybrid_search_reads_the_kept_children_once_and_fuses_exact_ranks(
    open_store: Any, tenants: tuple[str, np.ndarray]
) -> None:
    """Both branches rank the children the filter keeps from one read of them: the lexical
    branch checks their tsvectors instead of a GIN bitmap of every child holding a query
    lexeme (at a million children, most of them for a common word)."""
    import json

    from parrot_parents.stores.filters import filter_params
    from parrot_parents.stores.postgres.connections.prepared import Prepared
    from parrot_parents.stores.postgres.search.context_sql import search_with_context
    from parrot_parents.stores.postgres.search.kept import kept_rows
    from parrot_parents.stores.postgres.search.request import SearchRequest

    store = await open_store()
    engine, table = await store.ready()
    question, rare = "row 40 about the rare tenant", {"tenant": RARE}
    q = _query(11)
    request = SearchRequest.build(
        mode="hybrid", limit=10, dimension=384, vector=q, text=question, filter=rare
    )
    where = store.searcher.where(table, request)
    kept = kept_rows(table, where, lexical=True, vector=True, capped=False)
    ranked = store.searcher.statement(table, request, where, exact=True, kept=kept)
    prepared = Prepared.compile(search_with_context(table, ranked, None), engine.dialect)
    args = prepared.args({"query_vector": q, "lexical_query": question, **filter_params(where[-1])})

    async def explain(conn: Any) -> Any:
        sql = f"EXPLAIN (FORMAT JSON) {prepared.sql}"
        rows = await conn.fetch_with(sql, args, store.searcher.settings(request))
        plan = rows[0][0]
        return json.loads(plan) if isinstance(plan, str) else plan

    plan = await store.read_pool.run(explain)
    scans = [
        n
        for n in _nodes(plan)
        if n.get("Relation Name") == table.name
        and n["Node Type"] in ("Seq Scan", "Bitmap Heap Scan")
    ]
    assert len(scans) == 1, json.dumps(plan)[:3000]  # one read of the kept children
    # The fused ranks are weighted RRF (k 60) of the exact dense and exact lexical ranks.
    got = await store.similarity_search_by_vector(
        q, limit=10, filter=rare, search_mode="hybrid", query=question
    )
    assert got[0].filter_plan is not None and got[0].filter_plan.exact
    dense = {rid: i + 1 for i, rid in enumerate(_exact(tenants[1], q, RARE, 10))}
    lexical_only = await store.similarity_search(
        question, limit=10, filter=rare, search_mode="lexical"
    )
    indexed = await open_store(filter_exact_below=0)  # the lexical branch over the GIN index
    through_index = await indexed.similarity_search(
        question, limit=10, filter=rare, search_mode="lexical"
    )
    assert through_index[0].filter_plan is not None and not through_index[0].filter_plan.exact
    assert [(r.id, r.lexical_rank) for r in lexical_only] == [
        (r.id, r.lexical_rank) for r in through_index
    ]
    assert [r.lexical_score for r in lexical_only] == pytest.approx(
        [r.lexical_score for r in through_index], rel=1e-9
    )
    assert lexical_only[0].id == _id(40)  # the one child holding "40"
    lexical = {r.id: r.lexical_rank for r in lexical_only}
    fused = {
        rid: (1 / (60 + dense[rid]) if rid in dense else 0.0)
        + (1 / (60 + lexical[rid]) if rid in lexical else 0.0)
        for rid in dense.keys() | lexical.keys()
    }
    want = sorted(fused, key=lambda rid: (-fused[rid], dense.get(rid, 10**9), rid))[:10]
    assert [r.id for r in got] == want
    assert [(r.dense_rank, r.lexical_rank) for r in got] == [
        (dense.get(rid), lexical.get(rid)) for rid in want
    ]


async def test_a_conjunction_of_correlated_keys_is_counted_on_a_sample(
    pg_dsn: str, embeddings: Any
) -> None:
    """Two filter keys that the planner takes for independent, where the rows one keeps
    are mostly outside the other's: a department, and a range of positions straddling
    its edge. The estimate's product sends the search through the indexes; a sample
    counts what the conjunction keeps, and it is ranked exactly. An estimate more than
    ``DOUBT`` times the threshold is trusted."""
    rng = np.random.default_rng(9)
    n = 600
    vectors = rng.standard_normal((n, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    docs = [
        Document(
            id=_id(i),
            page_content=f"row {i}",
            metadata={
                "document_id": f"d{i}",
                "is_chunk": True,
                "start_index": 0,
                "end_index": 10,
                "dept": "x" if i < n // 2 else "y",
                "pos": i,
            },
        )
        for i in range(n)
    ]
    table = unique_table("fc")
    options = HNSWQueryOptions(filter_exact_below=20)
    # 8 rows of "x" in the range; independent shares make it about 0.5 * 48 = 24.
    flt = {"dept": "x", "pos": {"$gte": 292, "$lt": 340}}
    async with PgVectorStore(
        dsn=pg_dsn,
        table=table,
        embedding=embeddings,
        filter_keys=["dept", "pos"],
        search_options=options,
    ) as store:
        try:
            await write_at_once(store, docs, list(vectors))
            async with store.engine.begin() as conn:
                await conn.exec_driver_sql(f"ANALYZE {store.qualified_name}")
            q = vectors[290]
            found = await store.similarity_search_by_vector(q.tolist(), limit=5, filter=flt)
            plan = found.filter_plan
            assert plan is not None and plan.search == "exact" and plan.sampled, plan
            assert plan.estimate <= 10  # counted on a sample of the table's blocks
            kept = list(range(292, 300))
            best = sorted(kept, key=lambda i: (-float(vectors[i] @ q), _id(i)))[:5]
            assert [d.id for d in found] == [_id(i) for i in best]
            far = HNSWQueryOptions(filter_exact_below=24 // (DOUBT + 1))
            store.search_options = far
            trusted = await store.similarity_search_by_vector(q.tolist(), limit=5, filter=flt)
            assert trusted.filter_plan is not None and not trusted.filter_plan.sampled
            assert trusted.filter_plan.search.startswith("index")
            store.search_options = options
            # One key alone is estimated as before: no sample.
            one = await store.similarity_search_by_vector(
                q.tolist(), limit=5, filter={"pos": {"$gte": 0, "$lt": 300}}
            )
            assert one.filter_plan is not None and not one.filter_plan.sampled
        finally:
            await store.drop()
