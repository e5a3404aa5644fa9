"""An index plan's lexical branch reads a narrow filter key through its B-tree, ANDed with
the lexemes' GIN bitmap, instead of checking the filter on every child holding a query
lexeme (``FilterPlan.anded``,
:func:`~parrot_parents.stores.postgres.search.filter_plan.lexical_anded`); the ranking is
the same."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from sqlalchemy import Column, MetaData, Table, Text
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql import JSONB

from parrot_parents.stores.filters import named_keys
from parrot_parents.stores.postgres.search.filter_plan import (
    CHECKED_ABOVE,
    LISTED_VALUE_ROWS,
    FilterPlan,
    checked_keys,
    lexical_anded,
)
from parrot_parents.stores.postgres.search.request import SearchRequest
from parrot_parents.stores.postgres.search.where import filter_where, lexical_where
from parrot_parents.stores.results import SearchResults
from tests.conftest import analysed_collection, child_metadata, reopened, unit_vectors

N = 1200
BUCKETS = 100  # 12 children each
WORDS = ("apple", "river", "stone", "cloud")


def _id(i: int) -> str:
    return f"d{i}#c:0-10"


def _text(i: int) -> str:
    # Every child holds "row"; the others spread term frequencies and lengths.
    return " ".join(["row", *(WORDS[(i + j) % 4] for j in range(i % 5)), f"n{i}"])


@pytest.fixture(scope="module")
def buckets(pg_dsn: str, embeddings: Any) -> Iterator[tuple[str, np.ndarray]]:
    """Children with ``half`` (two values) and ``bucket`` (100) as filter keys and
    ``tenant`` (three) without, analysed: ``(table, vectors)``."""
    vectors = unit_vectors(N, 5)
    meta = [
        child_metadata(i, half=f"h{i % 2}", bucket=i % BUCKETS, tenant=f"t{i % 3}")
        for i in range(N)
    ]
    docs = [Document(id=_id(i), page_content=_text(i), metadata=meta[i]) for i in range(N)]
    keys = {"filter_keys": ["half", "bucket"]}
    with analysed_collection(pg_dsn, embeddings, "la", docs, list(vectors), **keys) as table:
        yield table, vectors


def _ranked(got: SearchResults) -> list[tuple[str, float]]:
    return [(r.id, round(float(r.score or 0.0), 9)) for r in got]


_LISTED = [1, 5, 9, 13, 17, 21, 25]


@pytest.mark.parametrize(
    ("flt", "anded", "keep"),
    [
        ({"bucket": {"$gte": 10, "$lt": 40}}, ("bucket",), lambda i: 10 <= i % BUCKETS < 40),
        ({"bucket": {"$in": _LISTED}}, ("bucket",), lambda i: i % BUCKETS in _LISTED),
        # Both keys keep like shares: both are ANDed.
        (
            {"half": "h1", "bucket": {"$gte": 0, "$lt": 60}},
            ("bucket", "half"),
            lambda i: i % 2 == 1 and i % BUCKETS < 60,
        ),
        # The scope key keeps 25 times the range's rows: checked, not ANDed.
        (
            {"$and": [{"half": "h0"}, {"bucket": {"$gte": 10, "$lt": 12}}]},
            ("bucket",),
            lambda i: i % 2 == 0 and 10 <= i % BUCKETS < 12,
        ),
    ],
)
@pytest.mark.parametrize("mode", ["lexical", "hybrid"])
async def test_the_lexical_branch_ands_narrow_keys_and_ranks_as_the_exact_plan(
    pg_dsn: str,
    embeddings: Any,
    buckets: tuple[str, np.ndarray],
    mode: str,
    flt: dict[str, Any],
    anded: tuple[str, ...],
    keep: Any,
) -> None:
    table, vectors = buckets
    q = vectors[7].tolist()

    async def search(store: Any) -> SearchResults:
        vector = None if mode == "lexical" else q
        return await store.similarity_search_by_vector(
            vector, limit=8, filter=flt, search_mode=mode, query="row apple stone"
        )

    async with reopened(pg_dsn, embeddings, table, filter_exact_below=5) as store:
        got = await search(store)
    plan = got.filter_plan
    assert plan is not None and plan.search == "index" and plan.anded == anded, plan
    assert plan.to_dict()["anded"] == list(anded)
    # Ranked exactly, the lexical branch scores the kept children holding a query lexeme:
    # with every child holding "row", the index plan's candidates are the same.
    async with reopened(pg_dsn, embeddings, table, filter_exact_below=10**6) as store:
        exact = await search(store)
    assert exact.filter_plan is not None and exact.filter_plan.search == "exact"
    kept = {_id(i) for i in range(N) if keep(i)}
    assert len(got) == 8 and {r.id for r in got} <= kept
    if mode == "lexical":
        assert _ranked(got) == _ranked(exact)


@pytest.mark.parametrize(
    ("flt", "mode"),
    [
        ({"bucket": {"$gte": 10, "$lt": 40}}, "dense"),
        # A key without statistics beside a filter key: no estimate of each alone.
        ({"bucket": {"$gte": 10, "$lt": 40}, "tenant": "t1"}, "hybrid"),
        ({"tenant": "t1"}, "hybrid"),
        # Not ANDed at the top level.
        ({"$or": [{"bucket": 3}, {"bucket": {"$gte": 50}}]}, "hybrid"),
        # A list of 100 values costs its bitmap more than the candidates it would spare.
        ({"bucket": {"$in": list(range(BUCKETS))}}, "lexical"),
    ],
)
async def test_nothing_is_anded_without_a_lexical_branch_or_an_estimate_of_each_key(
    pg_dsn: str, embeddings: Any, buckets: tuple[str, np.ndarray], flt: dict[str, Any], mode: str
) -> None:
    table, vectors = buckets
    async with reopened(pg_dsn, embeddings, table, filter_exact_below=5) as store:
        got = await store.similarity_search_by_vector(
            vectors[2].tolist(), limit=5, filter=flt, search_mode=mode, query="row river"
        )
    plan = got.filter_plan
    # (A containment on a key without statistics is estimated at a row or two: its exact
    # attempt reads past the bound, then the indexes rank.)
    assert plan is not None and "index" in plan.search and plan.anded == (), plan
    assert "anded" not in plan.to_dict()


def _table() -> Table:
    return Table(
        "t", MetaData(), Column("id", Text), Column("document", Text), Column("cmetadata", JSONB)
    )


def _sql(where: list[Any]) -> str:
    return str(where[-1].compile(dialect=postgresql.dialect()))


def test_the_lexical_predicates_read_only_the_anded_keys_through_their_indexes() -> None:
    table = _table()
    flt = {"half": "h0", "bucket": {"$gte": 1, "$lt": 3}, "$or": [{"tenant": "t1"}, {"x": 1}]}
    request = SearchRequest(mode="hybrid", limit=5, text="q", filter=flt)
    keyed = {"half", "bucket"}
    scanned = filter_where(table, request, keyed=keyed, scanned=True)
    # Nothing ANDed: the dense branch's predicates, in the form no index serves.
    assert lexical_where(table, request, scanned, keyed, ()) is scanned
    sql = _sql(lexical_where(table, request, scanned, keyed, ("bucket",)))
    plain = _sql(filter_where(table, request, keyed=keyed))
    # ``bucket`` over the column its B-tree indexes, every other key over the checked one.
    assert "jsonb_typeof(t.cmetadata[" in sql and "(t.cmetadata || '{}'::jsonb)[%(filter_0)s" in sql
    assert sql.count("t.cmetadata ||") == 3, sql
    assert sql.replace("(t.cmetadata || '{}'::jsonb)", "t.cmetadata") == plain


def test_a_key_is_anded_up_to_the_bound_and_never_when_many_times_the_narrowest() -> None:
    assert lexical_anded({"rank": CHECKED_ABOVE * 500}, 500) == ("rank",)
    assert lexical_anded({"rank": CHECKED_ABOVE * 500 + 1}, 500) == ()
    assert lexical_anded({"half": 50_000, "rank": 2_000}, 4_000) == ("rank",)
    assert lexical_anded({"half": 5_000, "rank": 2_000}, 4_000) == ("half", "rank")
    assert lexical_anded({}, 4_000) == ()
    # Each listed value costs the bitmap LISTED_VALUE_ROWS rows.
    bound = CHECKED_ABOVE * 500
    assert lexical_anded({"rank": 100}, 500, {"rank": (bound - 100) // LISTED_VALUE_ROWS}) == (
        "rank",
    )
    assert lexical_anded({"rank": 100}, 500, {"rank": bound // LISTED_VALUE_ROWS}) == ()
    assert lexical_anded({"rank": 100, "half": 600}, 500, {"half": 9}) == ("half", "rank")


@settings(max_examples=50, deadline=None)
@given(
    rows=st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 10**7), min_size=1),
    budget=st.integers(1, 10**5),
    listed=st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 1000)),
)
def test_anded_keys_are_within_the_bound_and_none_is_checked(
    rows: dict[str, int], budget: int, listed: dict[str, int]
) -> None:
    anded = lexical_anded(rows, budget, listed)

    def cost(k: str) -> int:
        return rows[k] + LISTED_VALUE_ROWS * listed.get(k, 0)

    assert list(anded) == sorted(anded) and set(anded) <= set(rows)
    assert all(cost(k) <= CHECKED_ABOVE * budget for k in anded)
    assert not set(anded) & set(checked_keys(rows))
    # The narrowest key is ANDed whenever its bitmap is within the bound.
    narrowest = min(rows, key=lambda k: (rows[k], k))
    assert (narrowest in anded) == (cost(narrowest) <= CHECKED_ABOVE * budget)
    # Without lists, a key's rows alone decide.
    assert set(lexical_anded(rows, budget)) >= set(anded)


def test_named_keys_are_every_key_at_any_depth() -> None:
    flt = {"a": 1, "$and": [{"b": {"$gt": 1}}, {"$or": [{"c": 2}, {"$not": {"d": 3}}]}]}
    assert named_keys(flt) == {"a", "b", "c", "d"}
    assert named_keys({"$not": [{"e": 1}]}) == {"e"}
    assert named_keys({}) == set()


def test_a_plan_names_its_anded_keys_only_when_there_are_some() -> None:
    assert "anded" not in FilterPlan(10, "index").to_dict()
    assert FilterPlan(10, "index", anded=("a", "b")).to_dict()["anded"] == ["a", "b"]
