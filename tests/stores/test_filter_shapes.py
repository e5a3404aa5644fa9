"""A filter compiled once per skeleton (``FilterShapes``,
:mod:`parrot_parents.stores.filter_skeleton`): every later filter of that skeleton gets
the SQL, values and long lists its own compilation gives, or its own error; a search run
with one skeleton and new values keeps what the new values keep."""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from sqlalchemy import Column, MetaData, Table, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import asyncpg as pg_asyncpg

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.filter_skeleton import MARK, leaves_valid, probe, skeleton
from parrot_parents.stores.filters import compile_filter, filter_params, validate_filter
from parrot_parents.stores.postgres.collections.partitions import unindexed
from parrot_parents.stores.postgres.search.filter_shapes import CompiledFilter, FilterShapes
from tests.conftest import analysed_collection, child_metadata, reopened, unit_vectors

DIALECT = pg_asyncpg.dialect()
TABLE = Table("t", MetaData(), Column("id", Text), Column("cmetadata", JSONB))
KEYED = frozenset({"rank", "kind"})

_KEYS = st.sampled_from(["rank", "kind", "other", "$and", "$or", "$not", "$in", "$gte"])
_OPERATORS = st.sampled_from(
    [
        *("$eq", "$ne", "$lt", "$lte", "$gt", "$gte", "$in", "$nin", "$between"),
        *("$exists", "$like", "$ilike", "$regex"),
    ]
)
_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=f"ab%_\\\x00\ud800{MARK}", max_size=4),
)
# Anything the filter language might be handed: most of it refused by the compiler.
_WILD = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.one_of(_KEYS, _OPERATORS), inner, max_size=3),
    ),
    max_leaves=8,
)


def _condition(key: str, op: str, value: Any) -> dict[str, Any]:
    return {key: {op: value}}


_NUMBERS = st.one_of(st.integers(-5, 5), st.floats(-5, 5))
_ATOMS = st.one_of(
    st.builds(lambda k, v: {k: v}, st.sampled_from(["rank", "kind", "other"]), _SCALARS),
    st.builds(
        _condition,
        st.sampled_from(["rank", "kind", "other"]),
        st.sampled_from(["$lt", "$gte", "$like", "$eq", "$ne"]),
        st.one_of(_NUMBERS, st.text(alphabet="ab%\\", max_size=3)),
    ),
    st.builds(
        _condition,
        st.sampled_from(["rank", "other"]),
        st.sampled_from(["$in", "$nin", "$between"]),
        st.lists(st.one_of(_NUMBERS, st.text(alphabet="ab", max_size=2)), max_size=3),
    ),
)
# Filters the language accepts, mostly.
_FILTERS = st.recursive(
    _ATOMS,
    lambda inner: st.one_of(
        st.builds(lambda a, b: {"$and": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"$or": [a, b]}, inner, inner),
        st.builds(lambda a: {"$not": a}, inner),
        st.builds(lambda a, b: {**a, **b}, inner, inner),
    ),
    max_leaves=4,
)


def _refilled(shape: Hashable, leaves: Iterator[Any]) -> Any:
    """A filter of skeleton ``shape`` with these leaves."""
    if shape is None or isinstance(shape, bool):
        return shape
    if shape in ("str", "int", "float"):
        return next(leaves)
    tag, items = shape  # type: ignore[misc]
    if tag == "{":
        return {key: _refilled(item, leaves) for key, item in items}
    return [_refilled(item, leaves) for item in items]


def _like(leaf: Any) -> st.SearchStrategy[Any]:
    """Another value of ``leaf``'s type, out of the compiler's limits at times."""
    if isinstance(leaf, int):
        return st.one_of(st.integers(-10, 10), st.integers(-(2**64), 2**64))
    if isinstance(leaf, float):
        return st.floats(allow_nan=True, allow_infinity=True)
    return st.text(alphabet=f"ab%\\\x00\ud800{MARK}", max_size=4)


def _outcome(compile: Any) -> tuple[str, Any]:
    try:
        got: CompiledFilter = compile()
    except ConfigurationError as exc:
        return "refused", str(exc)
    return "compiled", (got.sql, got.params, got.lists)


def _fresh(flt: Any, keyed: frozenset[str], prefix: str, checked: frozenset[str]) -> Any:
    """The compilation a store with no skeleton kept gives (compiled as it is)."""
    return lambda: FilterShapes().compile(TABLE, flt, DIALECT, keyed, prefix, checked)


def test_a_filter_first_met_is_compiled_as_compile_filter_compiles_it() -> None:
    flt = {"rank": {"$in": [1, 2]}, "kind": "x", "other": {"$gte": 3}}
    got = FilterShapes().compile(TABLE, flt, DIALECT, KEYED, "p_", frozenset({"kind"}))
    lists: dict[str, int] = {}
    column = unindexed(TABLE.c.cmetadata)
    where = compile_filter(
        TABLE.c.cmetadata, flt, KEYED, "p_", checked={"kind"}, checked_column=column, lists=lists
    )
    assert got.sql == str(where.compile(dialect=DIALECT))
    assert got.params == filter_params(where) and got.lists == lists == {"p_1": 2}


_SETTINGS = st.tuples(
    st.sampled_from([frozenset(), KEYED]),
    st.sampled_from(["filter_", "filter_part0_"]),
    st.sampled_from([frozenset(), frozenset({"rank"})]),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=st.one_of(_FILTERS, _WILD), setting=_SETTINGS, data=st.data())
@example(
    first={"rank": {"$in": ["a", "b"]}, "kind": "x", "other": {"$like": "a%"}},
    setting=(KEYED, "filter_", frozenset({"rank"})),
    data=None,
)
def test_a_skeleton_compiled_once_gives_each_filter_its_own_compilation(
    first: Any, setting: tuple[frozenset[str], str, frozenset[str]], data: Any
) -> None:
    keyed, prefix, checked = setting
    shapes = FilterShapes()
    found = skeleton(first)
    # The first filter of a skeleton is compiled as it is, and teaches the skeleton.
    assert _outcome(lambda: shapes.compile(TABLE, first, DIALECT, keyed, prefix, checked)) == (
        _outcome(_fresh(first, keyed, prefix, checked))
    )
    if found is None:
        return
    shape, leaves = found
    if data is None:  # the example's leaves are strings: the same leaves, reversed
        others = [leaves[::-1]]
    else:
        others = [[data.draw(_like(leaf)) for leaf in leaves] for _ in range(3)]
    for new in others:
        second = _refilled(shape, iter(new))
        assert skeleton(second) == (shape, new)
        got = _outcome(
            lambda flt=second: shapes.compile(TABLE, flt, DIALECT, keyed, prefix, checked)
        )
        assert got == _outcome(_fresh(second, keyed, prefix, checked)), second


def _verdict(flt: Any) -> str | None:
    try:
        validate_filter(flt)
    except ConfigurationError as exc:
        return str(exc)
    return None


def _refusal(flt: Any) -> str | None:
    state, got = _outcome(_fresh(flt, frozenset(), "filter_", frozenset()))
    return got if state == "refused" else None


@settings(max_examples=120, deadline=None)
@given(first=st.one_of(_FILTERS, _WILD), data=st.data())
def test_a_filter_is_refused_exactly_when_its_compilation_is_and_in_its_words(
    first: Any, data: Any
) -> None:
    """``validate_filter`` knows a valid skeleton and checks only the new leaves."""
    assert _verdict(first) == _refusal(first)
    found = skeleton(first)
    if found is None:
        return
    shape, leaves = found
    for _ in range(3):
        second = _refilled(shape, iter([data.draw(_like(leaf)) for leaf in leaves]))
        assert _verdict(second) == _refusal(second), second


def test_a_skeleton_keeps_structure_and_types_and_leaves_out_values() -> None:
    flt = {"rank": {"$gte": 1, "$lt": 2.5}, "kind": "a", "x": [True, None, "b"]}
    shape, leaves = skeleton(flt) or (None, [])
    assert leaves == [1, 2.5, "a", "b"]
    assert skeleton({"rank": {"$gte": 7, "$lt": 0.5}, "kind": "zz", "x": [True, None, ""]}) == (
        shape,
        [7, 0.5, "zz", ""],
    )
    # Types, booleans and null, key order and list lengths are structure.
    for other in (
        {"rank": {"$gte": 1.0, "$lt": 2.5}, "kind": "a", "x": [True, None, "b"]},
        {"rank": {"$gte": 1, "$lt": 2.5}, "kind": "a", "x": [False, None, "b"]},
        {"rank": {"$gte": 1, "$lt": 2.5}, "kind": "a", "x": [True, "b", "b"]},
        {"rank": {"$lt": 2.5, "$gte": 1}, "kind": "a", "x": [True, None, "b"]},
        {"rank": {"$gte": 1, "$lt": 2.5}, "kind": "a", "x": [True, None, "b", "c"]},
    ):
        found = skeleton(other)
        assert found is not None and found[0] != shape
    # A probe has the skeleton's shape with values of the leaves' types, all distinct.
    probed = skeleton(probe(shape))
    assert probed is not None and probed[0] == shape and len(set(probed[1])) == 4


@pytest.mark.parametrize(
    "flt",
    [
        {"k": (1, 2)},
        {1: "a"},
        {f"a{MARK}": 1},
        {"k": {1, 2}},
        {"k": np.int64(3)},
        {"k": type("Text", (str,), {})("a")},
    ],
)
def test_what_is_no_plain_json_has_no_skeleton_and_is_compiled_each_time(flt: Any) -> None:
    assert skeleton(flt) is None
    shapes = FilterShapes()
    for _ in range(2):
        assert _outcome(lambda: shapes.compile(TABLE, flt, DIALECT, KEYED)) == _outcome(
            _fresh(flt, KEYED, "filter_", frozenset())
        )


def test_leaves_the_compiler_may_refuse_are_not_vouched_for() -> None:
    assert leaves_valid([1, 2.5, "a%"])
    for bad in (2**63, float("nan"), "a\x00", "\ud800", "a\\"):
        assert not leaves_valid(["ok", bad])


def test_the_shapes_kept_are_bounded_and_the_oldest_go_first() -> None:
    shapes = FilterShapes(size=2)
    for key in ("a", "b", "c"):
        shapes.compile(TABLE, {key: 1}, DIALECT)
    assert len(shapes._shapes) == 2
    kept = [key[2] for key in shapes._shapes]
    assert kept == [skeleton({k: 1})[0] for k in "bc"]  # type: ignore[index]


N = 400


@pytest.fixture(scope="module")
def ranked(pg_dsn: str, embeddings: Any) -> Iterator[tuple[str, np.ndarray]]:
    """Children with ``half`` (two values) and ``rank`` (0..199) as filter keys and
    ``tag`` (four) without: ``(table, vectors)``."""
    vectors = unit_vectors(N, 11)
    meta = [child_metadata(i, half=f"h{i % 2}", rank=i % 200, tag=f"g{i % 4}") for i in range(N)]
    docs = [
        Document(id=f"d{i}#c:0-10", page_content=f"row {i}", metadata=meta[i]) for i in range(N)
    ]
    keys = {"filter_keys": ["half", "rank"]}
    with analysed_collection(pg_dsn, embeddings, "fs", docs, list(vectors), **keys) as table:
        yield table, vectors


@pytest.mark.parametrize("exact_below", [10**6, 5])
async def test_searches_of_one_skeleton_keep_what_each_filter_keeps(
    pg_dsn: str, embeddings: Any, ranked: tuple[str, np.ndarray], exact_below: int
) -> None:
    """One store, one skeleton, new values each search (a scope ANDed with a range, whose
    keys are also estimated alone): each search returns its own filter's nearest, ranked
    exactly, or through the indexes."""
    table, vectors = ranked
    async with reopened(pg_dsn, embeddings, table, filter_exact_below=exact_below) as store:
        for low, half, tag in [(0, "h0", "g0"), (120, "h1", "g3"), (40, "h0", "g2")]:
            flt = {"$and": [{"half": half}, {"rank": {"$gte": low, "$lt": low + 60}}]}
            flt["tag"] = tag
            q = vectors[low + 1]
            got = await store.similarity_search_by_vector(
                q.tolist(), limit=5, filter=flt, search_mode="dense"
            )
            kept = [
                i
                for i in range(N)
                if f"h{i % 2}" == half and low <= i % 200 < low + 60 and f"g{i % 4}" == tag
            ]
            nearest = sorted(kept, key=lambda i: -float(vectors[i] @ q))[:5]
            assert [r.id for r in got] == [f"d{i}#c:0-10" for i in nearest], (flt, got.filter_plan)
            some = range(0, N, 3)
            scope = {"half": half, "rank": {"$gte": low, "$lt": low + 60}}
            inside = {i for i in some if f"h{i % 2}" == half and low <= i % 200 < low + 60}
            found = await store.ids_matching([f"d{i}#c:0-10" for i in some], scope)
            assert found == {f"d{i}#c:0-10" for i in inside}
