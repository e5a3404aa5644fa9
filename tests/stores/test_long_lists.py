"""A long ``$in`` on a filter key is estimated from a few of its values, scaled
(:func:`~parrot_parents.stores.postgres.search.filter_plan.thinned`): the planner costs
each value of the list against the key's most common values."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from sqlalchemy import column
from sqlalchemy.dialects.postgresql import JSONB

from parrot_parents.stores.filters import compile_filter, filter_params
from parrot_parents.stores.postgres.search.filter_plan import THIN_LISTS, thinned
from tests.conftest import analysed_collection, child_metadata, reopened, unit_vectors

N = 2000
RANKS = 200  # 10 children each

COL = column("cmetadata", JSONB)


def _lists(flt: dict[str, Any], keyed: frozenset[str]) -> dict[str, int]:
    lists: dict[str, int] = {}
    compile_filter(COL, flt, keyed, lists=lists)
    return lists


def _long_lists(flt: dict[str, Any], keyed: frozenset[str]) -> bool:
    # Whether the filter holds a list that its estimate thins.
    return any(n > THIN_LISTS for n in _lists(flt, keyed).values())


def test_only_lists_the_filter_ands_at_its_top_level_are_recorded() -> None:
    keyed = frozenset({"rank", "kind"})
    many = list(range(40))
    top = {"rank": {"$in": many}, "kind": "k1"}
    where = compile_filter(COL, top, keyed)
    lists = _lists(top, keyed)
    assert list(lists.values()) == [40]
    (name,) = lists
    assert len(filter_params(where)[name]) == 40  # the names are the searcher's
    nested = {"$and": [{"kind": "k1"}, {"$and": [{"rank": {"$in": many}}]}]}
    assert list(_lists(nested, keyed).values()) == [40]
    for elsewhere in (
        {"$or": [{"rank": {"$in": many}}, {"kind": "k1"}]},
        {"$not": {"rank": {"$in": many}}},
        {"rank": {"$nin": many}},
        {"other": {"$in": many}},
    ):
        assert _lists(elsewhere, keyed) == {}, elsewhere
        assert not _long_lists(elsewhere, keyed)
    assert _long_lists(top, keyed) and _long_lists(nested, keyed)
    assert not _long_lists({"rank": {"$in": many[:THIN_LISTS]}}, keyed)


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(1, 1000), min_size=1, max_size=3))
def test_a_thinned_list_keeps_at_most_the_bound_and_scales_by_what_it_dropped(
    lengths: list[int],
) -> None:
    args = {f"p{i}": [f'"{j}"' for j in range(n)] for i, n in enumerate(lengths)}
    args["other"] = "kept as it is"
    run, scale = thinned(args, {f"p{i}": n for i, n in enumerate(lengths)})
    assert run["other"] == "kept as it is"
    want = 1.0
    for i, n in enumerate(lengths):
        cut = run[f"p{i}"]
        assert 1 <= len(cut) <= THIN_LISTS and set(cut) <= set(args[f"p{i}"])
        assert cut == args[f"p{i}"] if n <= THIN_LISTS else len(cut) < n
        want *= n / len(cut)
    assert scale == pytest.approx(want)
    assert args["p0"] == [f'"{j}"' for j in range(lengths[0])]  # the caller's are untouched


@pytest.fixture(scope="module")
def ranked(pg_dsn: str, embeddings: Any) -> Iterator[tuple[str, np.ndarray]]:
    vectors = unit_vectors(N, 5)
    docs = [
        Document(
            id=f"d{i}#c:0-10",
            page_content=f"row {i}",
            metadata=child_metadata(i, rank=i % RANKS, kind=f"k{i % 2}"),
        )
        for i in range(N)
    ]

    keys = {"filter_keys": ["rank", "kind"]}
    with analysed_collection(pg_dsn, embeddings, "ll", docs, list(vectors), **keys) as table:
        yield table, vectors


@pytest.mark.parametrize(
    ("flt", "kept"),
    [
        ({"rank": {"$in": list(range(0, RANKS, 2))}}, N // 2),
        ({"rank": {"$in": list(range(100))}, "kind": "k0"}, N // 4),
        ({"$and": [{"rank": {"$in": list(range(150))}}, {"kind": "k1"}]}, 750),
    ],
)
async def test_a_long_list_is_estimated_near_what_it_keeps_and_ranked_right(
    pg_dsn: str,
    embeddings: Any,
    ranked: tuple[str, np.ndarray],
    flt: dict[str, Any],
    kept: int,
) -> None:
    table, vectors = ranked
    ranks = set(flt.get("rank", {}).get("$in", [])) or set(flt["$and"][0]["rank"]["$in"])
    kind = flt.get("kind") or (flt["$and"][1]["kind"] if "$and" in flt else None)
    keep = [i for i in range(N) if i % RANKS in ranks and (kind is None or f"k{i % 2}" == kind)]
    assert len(keep) == kept
    q = vectors[7]
    async with reopened(pg_dsn, embeddings, table, filter_exact_below=N) as store:
        got = await store.similarity_search_by_vector(q.tolist(), limit=10, filter=flt)
        plan = got.filter_plan
        assert plan is not None and plan.search == "exact"
        # The planner's own estimate of the independent conditions, from 16 values of the
        # list: within a fifth of the rows they keep.
        assert abs(plan.estimate - kept) <= kept / 5, plan
        order = sorted(keep, key=lambda i: (-float(vectors[i] @ q), i))[:10]
        assert [r.id for r in got] == [f"d{i}#c:0-10" for i in order]
