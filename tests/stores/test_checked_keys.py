"""A filter on several keys ranked exactly reads the rows through the narrow keys'
indexes and checks the wide ones on them (``FilterPlan.checked``,
:func:`~parrot_parents.stores.postgres.search.filter_plan.checked_keys`): a bot scoped to a
key of two values, asked with a narrow range, does not AND half of the scope key's index
into the read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from parrot_parents.stores.postgres.search.filter_plan import (
    CHECKED_ABOVE,
    FilterPlan,
    checked_keys,
    estimated_rows,
    part_rows,
)
from parrot_parents.stores.postgres.search.planning import key_conditions
from parrot_parents.stores.results import SearchResults
from tests.conftest import analysed_collection, child_metadata, reopened, unit_vectors

N = 1200
BUCKETS = 100  # 12 children each


def _id(i: int) -> str:
    return f"d{i}#c:0-10"


def _meta(i: int) -> dict[str, Any]:
    return child_metadata(i, half=f"h{i % 2}", bucket=i % BUCKETS, tenant=f"t{i % 3}")


@pytest.fixture(scope="module")
def halves(pg_dsn: str, embeddings: Any) -> Iterator[tuple[str, np.ndarray]]:
    """Random unit vectors with ``half`` (two values), ``bucket`` (100) and ``tenant``
    (three), ``half`` and ``bucket`` declared filter keys, analysed: ``(table, vectors)``."""
    vectors = unit_vectors(N, 11)
    docs = [Document(id=_id(i), page_content=f"row {i}", metadata=_meta(i)) for i in range(N)]
    keys = {"filter_keys": ["half", "bucket"]}
    with analysed_collection(pg_dsn, embeddings, "ck", docs, list(vectors), **keys) as table:
        yield table, vectors


def _exact(vectors: np.ndarray, q: np.ndarray, keep: list[int], k: int) -> list[str]:
    return [_id(i) for i in sorted(keep, key=lambda i: (-float(vectors[i] @ q), i))[:k]]


@pytest.mark.parametrize("mode", ["dense", "hybrid", "lexical"])
async def test_a_wide_scope_with_a_narrow_range_is_checked_not_read_through_its_index(
    pg_dsn: str, embeddings: Any, halves: tuple[str, np.ndarray], mode: str
) -> None:
    table, vectors = halves
    flt = {"$and": [{"half": "h0"}, {"bucket": {"$gte": 10, "$lt": 12}}]}
    keep = [i for i in range(N) if i % 2 == 0 and 10 <= i % BUCKETS < 12]
    q = vectors[10]
    async with reopened(pg_dsn, embeddings, table, filter_exact_below=200) as store:

        async def search(flt: dict[str, Any]) -> SearchResults:
            vector = None if mode == "lexical" else q.tolist()
            return await store.similarity_search_by_vector(
                vector, limit=5, filter=flt, search_mode=mode, query="row"
            )

        got = await search(flt)
        plan = got.filter_plan
        assert plan is not None and plan.search == "exact" and plan.checked == ("half",), plan
        assert plan.to_dict()["checked"] == ["half"]
        assert {r.id for r in got} <= {_id(i) for i in keep} and len(got) == 5
        if mode == "dense":
            assert [r.id for r in got] == _exact(vectors, q, keep, 5)
        # Keys of like width are both read through their indexes; one key has nothing to
        # check against; nor has a filter key beside a key without statistics (whose
        # containment the planner estimates at a row, where it keeps a third).
        for narrow in (
            {"bucket": {"$gte": 10, "$lt": 40}, "half": "h1"},
            {"bucket": {"$gte": 10, "$lt": 12}},
            {"bucket": {"$gte": 10, "$lt": 40}, "tenant": "t1"},
        ):
            other = await search(narrow)
            assert other.filter_plan is not None and other.filter_plan.search == "exact"
            assert other.filter_plan.checked == () and "checked" not in other.filter_plan.to_dict()


async def test_a_plan_through_the_index_checks_nothing(
    pg_dsn: str, embeddings: Any, halves: tuple[str, np.ndarray]
) -> None:
    table, vectors = halves
    flt = {"half": "h0", "bucket": {"$gte": 0, "$lt": 60}}
    async with reopened(pg_dsn, embeddings, table, filter_exact_below=20) as store:
        got = await store.similarity_search_by_vector(vectors[3].tolist(), limit=5, filter=flt)
        assert got.filter_plan is not None and got.filter_plan.search.startswith("index")
        assert got.filter_plan.checked == ()


def test_a_key_is_checked_when_it_keeps_more_than_the_bound_times_the_narrowest() -> None:
    assert checked_keys({"half": 600, "bucket": 12}) == ("half",)
    assert checked_keys({"half": CHECKED_ABOVE * 12, "bucket": 12}) == ()
    assert checked_keys({"half": CHECKED_ABOVE * 12 + 1, "bucket": 12}) == ("half",)
    assert checked_keys({"a": 5000, "b": 4000, "c": 10}) == ("a", "b")
    assert checked_keys({"only": 10**6}) == ()
    # A key the planner takes to keep nothing counts as keeping one row.
    assert checked_keys({"a": 17, "b": 0}) == ("a",)


@settings(max_examples=50, deadline=None)
@given(rows=st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 10**7), min_size=1))
def test_the_narrowest_key_is_never_checked(rows: dict[str, int]) -> None:
    checked = checked_keys(rows)
    assert list(checked) == sorted(checked) and set(checked) < set(rows)
    narrowest = min(rows.values())
    assert all(rows[k] > narrowest for k in checked)


def test_a_keys_conditions_are_read_from_the_top_level_conjunction() -> None:
    flt = {
        "half": "h0",
        "$and": [{"bucket": {"$gte": 1}}, {"$and": [{"bucket": {"$lt": 5}}, {"t": 1}]}],
        "$or": [{"half": "h1"}],
    }
    assert key_conditions(flt, "half") == {"half": "h0"}
    assert key_conditions(flt, "bucket") == {
        "$and": [{"bucket": {"$gte": 1}}, {"bucket": {"$lt": 5}}]
    }
    assert key_conditions(flt, "nothing") == {}


def _plan(*rows: int) -> list[list[Any]]:
    # One row, whose one column is the plan as EXPLAIN (FORMAT JSON) gives it.
    branches = [{"Node Type": "Seq Scan", "Plan Rows": r} for r in rows]
    return [[[{"Plan": {"Node Type": "Append", "Plans": branches, "Plan Rows": sum(rows)}}]]]


def test_the_estimate_reads_each_part_after_the_three_counts() -> None:
    explained = _plan(50, 1000, 500, 400, 20)
    assert estimated_rows(explained, parts=2) == (100, 1000)
    assert part_rows(explained, 2) == [400, 20]
    # A filter the planner knows keeps nothing leaves its branches out: no parts, and the
    # collection's count is the largest branch left.
    short = _plan(1000, 500, 400)
    assert part_rows(short, 2) is None
    assert estimated_rows(short, parts=2) == (0, 1000)
    assert estimated_rows(_plan(1000, 500)) == (0, 1000)


def test_a_plan_without_checked_keys_says_nothing_of_them() -> None:
    plan = FilterPlan.for_estimate(10, 1000, 50)
    assert "checked" not in plan.to_dict()
