"""Filter keys (:mod:`parrot_parents.stores.postgres.collections.filter_keys`): a metadata
key given a B-tree index of its value and planner statistics. The rows a filter keeps are
the same with and without them, the planner estimates a range on one (no sample), and a
filtered search ranked through the HNSW index is never replaced by a scan of every row
the filter keeps. On the same rows, a bot's scope judged inside a search keeps what the
scope check keeps."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import asyncpg
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.backends import open_store
from parrot_parents.stores.context import ContextPlan, scope_key
from parrot_parents.stores.filters import compile_filter, validate_filter
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.catalog import list_collections
from parrot_parents.stores.postgres.collections.filter_keys import filter_key_statistics_name
from parrot_parents.stores.search_options import HNSWQueryOptions
from tests.conftest import unique_table, write_at_once

N = 600
KEYS = ["rank", "kind", "flag", "score"]
#: Values the rows hold and the filters ask for: numbers of two spellings, a number's
#: string, booleans, null, a list holding a value (containment of a scalar under a key
#: does not look inside it).
VALUES: list[Any] = [0, 1, 2, 3, 1.0, 2.5, "1", "k1", "k2", True, False, None]


def _meta(i: int) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "document_id": f"d{i}",
        "is_chunk": True,
        "start_index": 0,
        "end_index": 10,
        "kind": f"k{i % 3}",
        "flag": i % 2 == 0,
        "score": (i % 7) * 0.5,
    }
    # Most rows hold an integer rank; some another type, a list, null, or none.
    odd = i % 50
    if odd == 1:
        meta["rank"] = str(i % 4)
    elif odd == 2:
        meta["rank"] = [i % 4]
    elif odd == 3:
        meta["rank"] = None
    elif odd != 4:
        meta["rank"] = i % 4 if i % 5 else float(i % 4)
    return meta


@pytest.fixture(scope="module")
def tables(pg_dsn: str, embeddings: Any) -> Iterator[tuple[str, str, np.ndarray]]:
    """The same rows twice: ``(keyed table, plain table, vectors)``; the first with
    :data:`KEYS` as filter keys. Built once for the module, dropped after."""
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((N, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    keyed, plain = unique_table("fk"), unique_table("fp")
    docs = [
        Document(id=f"d{i}#c:0-10", page_content=f"row {i} of kind {i % 3}", metadata=_meta(i))
        for i in range(N)
    ]

    async def build() -> None:
        for table, keys in ((keyed, KEYS), (plain, None)):
            async with PgVectorStore(
                dsn=pg_dsn, table=table, embedding=embeddings, filter_keys=keys
            ) as store:
                await write_at_once(store, docs, list(vectors))
                async with store.engine.begin() as conn:
                    await conn.exec_driver_sql(f"ANALYZE {store.qualified_name}")

    async def drop() -> None:
        for table in (keyed, plain):
            async with PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings) as store:
                await store.drop()

    asyncio.run(build())
    yield keyed, plain, vectors
    asyncio.run(drop())


_value = st.sampled_from(VALUES)
_key = st.sampled_from([*KEYS, "missing"])


def _atom() -> st.SearchStrategy[dict[str, Any]]:
    plain = st.builds(lambda k, v: {k: v}, _key, _value)
    single = st.builds(lambda k, op, v: {k: {op: v}}, _key, st.sampled_from(["$eq", "$ne"]), _value)
    listed = st.builds(
        lambda k, op, vs: {k: {op: vs}},
        _key,
        st.sampled_from(["$in", "$nin"]),
        st.lists(_value, max_size=4),
    )
    ranged = st.builds(
        lambda k, lo, hi: {k: {"$gte": lo, "$lt": hi}},
        _key,
        st.integers(-1, 3),
        st.integers(0, 4),
    )
    between = st.builds(
        lambda k, lo, hi: {k: {"$between": [lo, hi]}},
        _key,
        st.sampled_from([0, 0.5, 1]),
        st.sampled_from([1, 2.5, 3]),
    )
    return st.one_of(plain, single, listed, ranged, between)


_filters = st.recursive(
    _atom(),
    lambda inner: st.one_of(
        st.builds(lambda a, b: {"$or": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"$and": [a, b]}, inner, inner),
        st.builds(lambda a: {"$not": a}, inner),
    ),
    max_leaves=3,
)


async def _kept(dsn: str, table: str, condition: Any) -> set[str]:
    from sqlalchemy.dialects.postgresql import JSONB
    from sqlalchemy.dialects.postgresql import asyncpg as dialect

    from parrot_parents.stores.filters import filter_params

    compiled = condition.compile(dialect=dialect.dialect())
    names = list(compiled.positiontup or [])
    params = filter_params(condition)
    # As the store's driver sends them: a JSONB value as its JSON text, None as SQL NULL.
    args = [
        json.dumps(params[n])
        if isinstance(compiled.binds[n].type, JSONB) and params[n] is not None
        else params[n]
        for n in names
    ]
    conn = await asyncpg.connect(dsn.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        rows = await conn.fetch(f"SELECT id FROM {table} WHERE {compiled.string}", *args)
    finally:
        await conn.close()
    return {r["id"] for r in rows}


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(flt=_filters)
@example(flt={"rank": {"$nin": [1, "1"]}})
@example(flt={"missing": {"$nin": [0]}})
@example(flt={"$not": {"rank": {"$in": [0, None]}}})
@example(flt={"rank": None, "kind": {"$in": ["k1", "k2"]}})
def test_a_filter_keeps_the_same_rows_compiled_for_filter_keys(
    tables: tuple[str, str, np.ndarray], pg_dsn: str, flt: dict[str, Any]
) -> None:
    """Any filter keeps exactly the rows its containment form keeps, compiled for filter
    keys (``cmetadata['k'] = v``, ``= ANY``, ``IS NOT TRUE`` for ``$nin``), over numbers
    of two spellings, a number's string, booleans, null, a list and a missing key."""
    from sqlalchemy import column
    from sqlalchemy.dialects.postgresql import JSONB

    keyed_table = tables[0]
    col = column("cmetadata", JSONB)
    want = asyncio.run(_kept(pg_dsn, keyed_table, compile_filter(col, flt)))
    got = asyncio.run(_kept(pg_dsn, keyed_table, compile_filter(col, flt, frozenset(KEYS))))
    assert got == want, flt


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(flt=_filters, checked=st.sets(_key, min_size=1))
@example(flt={"rank": 1, "kind": "k1"}, checked={"kind"})
@example(flt={"kind": "k1", "missing": None}, checked={"missing"})
def test_a_filter_keeps_the_same_rows_and_parameters_with_keys_checked(
    tables: tuple[str, str, np.ndarray], pg_dsn: str, flt: dict[str, Any], checked: set[str]
) -> None:
    """Conditions on checked keys, compiled over an expression no index serves (an exact
    ranking's wide conditions, ``FilterPlan.checked``), keep the same rows, under the
    same parameter names and values, for filter keys and for containment alike."""
    from sqlalchemy import column
    from sqlalchemy.dialects.postgresql import JSONB

    from parrot_parents.stores.filters import filter_params
    from parrot_parents.stores.postgres.collections.partitions import unindexed

    col = column("cmetadata", JSONB)
    for table, keyed in ((tables[0], frozenset(KEYS)), (tables[1], frozenset())):
        plain = compile_filter(col, flt, keyed)
        odd = compile_filter(col, flt, keyed, checked=checked, checked_column=unindexed(col))
        assert filter_params(odd) == filter_params(plain), flt
        want = asyncio.run(_kept(pg_dsn, table, plain))
        assert asyncio.run(_kept(pg_dsn, table, odd)) == want, (flt, checked)


def test_checked_keys_need_their_column() -> None:
    from sqlalchemy import column
    from sqlalchemy.dialects.postgresql import JSONB

    with pytest.raises(ValueError, match="checked_column"):
        compile_filter(column("cmetadata", JSONB), {"rank": 1}, checked={"rank"})


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(scope=_filters)
@example(scope={"rank": None})
@example(scope={"missing": {"$nin": [0]}})
def test_a_scope_judged_in_a_search_keeps_what_its_own_check_keeps(
    tables: tuple[str, str, np.ndarray], pg_dsn: str, embeddings: Any, scope: dict[str, Any]
) -> None:
    """A bot's scope judged on each row a search reads (``ContextPlan.scope``, one
    statement) keeps exactly the rows the scope check (``ids_matching``) keeps."""
    _, plain, vectors = tables

    async def run() -> tuple[dict[str, bool], set[str], list[str]]:
        async with PgVectorStore(
            dsn=pg_dsn, table=plain, embedding=embeddings, create=False
        ) as store:
            plan = ContextPlan(parents=False, scope=scope_key(scope))
            hits, context = await store.search_with_context("row", plan, limit=N, vector=vectors[5])
            ids = [h.id for h in hits]
            return context.judged, await store.ids_matching(ids, scope), ids

    judged, inside, ids = asyncio.run(run())
    assert ids and set(judged) == set(ids)
    assert {i for i, kept in judged.items() if kept} == inside, scope


@pytest.mark.parametrize(
    "flt",
    [
        {"rank": {"$gte": 1, "$lt": 3}},
        {"rank": {"$in": [0, 2, "1"]}},
        {"kind": "k1", "flag": True},
        {"$or": [{"score": {"$between": [0.5, 1.5]}}, {"rank": {"$nin": [1, 2]}}]},
        {"$and": [{"kind": {"$eq": "k2"}}, {"$not": {"rank": 3}}]},
        # null, through the driver as the search sends it (a bound None is SQL NULL).
        {"rank": None},
        {"rank": {"$eq": None}},
        {"$not": {"rank": None}},
        {"rank": {"$in": [None, 1]}},
    ],
)
async def test_a_search_finds_the_same_rows_with_filter_keys(
    tables: tuple[str, str, np.ndarray], pg_dsn: str, embeddings: Any, flt: dict[str, Any]
) -> None:
    """Through the whole search (the planner, the B-tree indexes, the exact ranking or
    the HNSW index), a collection with filter keys answers as one without."""
    keyed, plain, vectors = tables
    out = []
    for table in (keyed, plain):
        async with PgVectorStore(
            dsn=pg_dsn, table=table, embedding=embeddings, create=False
        ) as store:
            found = await store.similarity_search_by_vector(vectors[5], limit=N, filter=flt)
            out.append([r.id for r in found])
    assert out[0] == out[1], flt
    assert out[0], "the filter keeps some rows"


async def test_a_range_on_a_filter_key_plans_from_the_planner(
    tables: tuple[str, str, np.ndarray], pg_dsn: str, embeddings: Any
) -> None:
    """A range on a filter key is estimated by the planner (the key's statistics), not
    counted on a sample of the table; without the key it is sampled."""
    keyed, plain, vectors = tables
    flt = {"rank": {"$gte": 1, "$lt": 3}}
    ranks = [_meta(i).get("rank") for i in range(N)]
    kept = sum(1 for r in ranks if isinstance(r, int | float) and 1 <= r < 3)
    plans = {}
    for table in (keyed, plain):
        async with PgVectorStore(
            dsn=pg_dsn, table=table, embedding=embeddings, create=False
        ) as store:
            results, _ = await store.searcher.run("dense", 10, vectors[0], None, flt, None)
            plans[table] = results.filter_plan
    assert plans[plain] is not None and plans[plain].sampled
    assert plans[keyed] is not None and not plans[keyed].sampled
    assert kept / 2 <= plans[keyed].estimate <= kept * 2, (plans[keyed], kept)


async def test_filter_keys_are_listed_kept_and_added_once(
    tables: tuple[str, str, np.ndarray], pg_dsn: str, embeddings: Any
) -> None:
    """The collection listing names a collection's filter keys; a store opened again
    with them adds none, one that may not create is refused keys the collection lacks,
    and a writer adds a new one."""
    keyed, plain, _ = tables
    async with PgVectorStore(dsn=pg_dsn, table=keyed, embedding=embeddings) as store:
        found = {c.name: c for c in await list_collections(store.engine)}
    assert found[keyed].filter_keys == sorted(KEYS)
    assert found[plain].filter_keys == []
    assert found[keyed].to_dict()["filter_keys"] == sorted(KEYS)
    reader = PgVectorStore(
        dsn=pg_dsn, table=plain, embedding=embeddings, create=False, filter_keys=["kind"]
    )
    with pytest.raises(ConfigurationError, match='has no filter keys "kind"'):
        await reader.connect()
    await reader.close()
    async with PgVectorStore(dsn=pg_dsn, table=plain, embedding=embeddings) as store:
        found = {c.name: c for c in await list_collections(store.engine)}
    assert found[plain].filter_keys == []
    async with PgVectorStore(
        dsn=pg_dsn, table=keyed, embedding=embeddings, filter_keys=["kind", "extra key"]
    ) as writer:
        found = {c.name: c for c in await list_collections(writer.engine)}
        async with writer.engine.begin() as conn:
            await conn.exec_driver_sql(f'DROP INDEX "{_index(keyed, "extra key")}"')
            await conn.exec_driver_sql(
                f'DROP STATISTICS "{filter_key_statistics_name(keyed, "extra key")}"'
            )
    assert found[keyed].filter_keys == sorted([*KEYS, "extra key"])


def _index(table: str, key: str) -> str:
    from parrot_parents.stores.postgres.collections.filter_keys import filter_key_index_name

    return filter_key_index_name(table, key)


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("rank", "list of metadata keys"),
        (["$rank"], "filter key"),
        ([""], "filter key"),
        (["a\x00b"], "filter key"),
        ([None], "filter key"),
        (b"year", "list of metadata keys"),
        (5, "list of metadata keys"),
        ({"year": 1}, "list of metadata keys"),
    ],
)
def test_a_bad_filter_key_is_refused_before_anything_connects(keys: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        PgVectorStore(dsn="postgresql://nowhere.invalid/x", table="t", filter_keys=keys)


def test_filter_keys_are_refused_for_milvus() -> None:
    with pytest.raises(ConfigurationError, match="filter keys are for PostgreSQL"):
        open_store("milvus://localhost:19530", filter_keys=["rank"])


def test_an_in_of_a_thousand_values_is_checked_as_one_condition() -> None:
    """Validating a filter builds no condition per value of an ``$in`` (a request of
    hundreds of document ids paid 17 ms for it, three times per call)."""
    from sqlalchemy.sql import visitors

    import parrot_parents.stores.filters as filters

    built = []
    real = filters.compile_filter

    def spy(col: Any, flt: Any, keyed: Any = frozenset()) -> Any:
        out = real(col, flt, keyed)
        built.append(sum(1 for _ in visitors.iterate(out)))
        return out

    filters.compile_filter = spy
    filters._VALID.clear()  # a filter found valid before is not compiled again
    try:
        validate_filter({"document_id": {"$in": [f"doc{i}" for i in range(1000)]}})
    finally:
        filters.compile_filter = real
    assert built and built[0] < 20, built


async def test_a_scanned_hybrid_search_never_scans_every_row_the_filter_keeps(
    pg_dsn: str, embeddings: Any, tables: tuple[str, str, np.ndarray]
) -> None:
    """A hybrid search planned through the indexes (``index``) keeps its dense branch on
    the HNSW index even where the planner takes the filter (a containment and a range it
    has no statistics for) to keep a row or two, and would rank by a scan and a sort."""
    _, plain, vectors = tables
    flt = {"$and": [{"kind": "k1"}, {"score": {"$gte": 0, "$lt": 10}}]}
    options = HNSWQueryOptions(filter_exact_below=0)
    async with PgVectorStore(
        dsn=pg_dsn, table=plain, embedding=embeddings, create=False, search_options=options
    ) as store:
        seen: list[tuple[str, tuple[Any, ...]]] = []
        await store.read_pool.add_query_logger(lambda q: seen.append((q.query, q.args)))
        results, _ = await store.searcher.run("hybrid", 5, vectors[1], "row of kind", flt, None)
        await asyncio.sleep(0.05)
        assert results.filter_plan is not None
        assert results.filter_plan.search.startswith("index")
        statement = next(q for q in seen if "row_number() OVER" in q[0] and "EXPLAIN" not in q[0])
        changes = [q for q in seen if "set_config" in q[0]]
    conn = await asyncpg.connect(pg_dsn.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        await conn.set_type_codec(
            "jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog"
        )
        from pgvector.asyncpg import register_vector

        await register_vector(conn)
        for sql, args in changes:
            await conn.execute(sql, *args)
        plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + statement[0], *statement[1]))
    finally:
        await conn.close()
    assert "embedding_hnsw" in plan, plan
    assert not re.search(rf"Seq Scan on {plain}(\s|$)", plan), plan
    # The lexical branch (BM25 in SQL here) finds its candidates through the lexemes'
    # GIN index, never by reading the table in key order.
    assert f"{plain}_lexical_gin" in plan, plan
    full = re.findall(rf"Index Scan using {plain}_pkey on {plain}\b[^\n]*\n(?!\s*Index Cond)", plan)
    assert not full, plan


@pytest.mark.parametrize("keyed", [True, False])
async def test_the_estimate_is_the_filters_share_of_the_children(
    tables: tuple[str, str, np.ndarray], pg_dsn: str, embeddings: Any, keyed: bool
) -> None:
    """The planner's estimate of the children an equality keeps is close to their count:
    the share it guesses for the child predicate is divided out (it halved the estimate,
    sending a filter keeping more than the exact threshold to an exact attempt first)."""
    table = tables[0] if keyed else tables[1]
    kept = sum(1 for i in range(N) if _meta(i)["kind"] == "k1")
    async with PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings, create=False) as store:
        results, _ = await store.searcher.run("dense", 10, tables[2][0], None, {"kind": "k1"}, None)
    plan = results.filter_plan
    assert plan is not None and not plan.sampled
    assert kept / 1.5 <= plan.estimate <= kept * 1.5, (plan, kept)


async def test_the_lexical_rule_widened_for_a_filter_stays_within_a_bigint(
    pg_dsn: str, embeddings: Any, tables: tuple[str, str, np.ndarray]
) -> None:
    """Ranked through the indexes, a filter widens the lexical branch's candidate rule by
    how few children it keeps; the exact rule (whose budgets are at a bigint's edge) stays
    valid SQL, and finds what it finds exactly."""
    from parrot_parents.stores.postgres.search.filter_plan import MAX_WIDENING, widened
    from parrot_parents.stores.postgres.search.hybrid import CANDIDATES, EXACT_CANDIDATES

    assert widened(EXACT_CANDIDATES, 1024).budget <= 2**62
    assert widened(CANDIDATES, 4).budget == 4 * CANDIDATES.budget
    assert widened(CANDIDATES, 1024).budget == MAX_WIDENING * CANDIDATES.budget
    _, plain, vectors = tables
    options = HNSWQueryOptions(filter_exact_below=0)
    async with PgVectorStore(
        dsn=pg_dsn, table=plain, embedding=embeddings, create=False, search_options=options
    ) as store:
        store.lexical_candidates = EXACT_CANDIDATES
        found, _ = await store.searcher.run(
            "hybrid", 5, vectors[2], "row of kind", {"kind": "k2"}, None
        )
    assert found.filter_plan is not None and found.filter_plan.search.startswith("index")
    assert found and all(r.metadata["kind"] == "k2" for r in found)


@pytest.mark.parametrize(
    "bad",
    [{1: "a"}, {"a": float("nan")}, {"a": {"$nope": 1}}, {"a": "\ud800"}, {"a": 2**64}],
)
def test_a_filter_refused_once_is_refused_every_time(bad: dict[Any, Any]) -> None:
    """A valid filter is remembered by its JSON (each call checks it at several layers);
    a refused one never is, nor one whose JSON reads back different (an integer key)."""
    validate_filter({"a": 1, "b": {"$in": [1, 2]}})
    validate_filter({"a": 1, "b": {"$in": [1, 2]}})
    for _ in range(2):
        with pytest.raises(ConfigurationError):
            validate_filter(bad)
