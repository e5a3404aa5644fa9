"""The filter benchmark's real-text cases keep what they say, about the share they aim at.

A table of documents of unequal size (as the distractor collection's manuals are) stands
in for the collection: numpy only, no server, no model.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.latency._filters.cases import KINDS, SELECTIVITIES, Children
from benchmarks.latency._filters.real import REAL_SCOPE, RealCases

PACKAGES = ("chunking_eval", "debian-policy", "postgresql-doc-15", "python3.11-doc", "git-doc")


def collection(sizes: list[int], packages: list[int]) -> Children:
    """``sizes[j]`` children of document ``j`` (position ``j``), in package ``packages[j]``."""
    position = np.repeat(np.arange(len(sizes)), sizes)
    doc_ids = np.array([f"d{j}" for j in position], dtype=object)
    package = np.array([PACKAGES[packages[j]] for j in position], dtype=object)
    ids = [f"d{j}#c{k}" for j, n in enumerate(sizes) for k in range(n)]
    rng = np.random.default_rng(len(ids))
    vectors = rng.standard_normal((len(ids), 8)).astype(np.float32)
    keys = {"document_id": doc_ids, "package": package, "position": position.astype(np.int32)}
    return Children(ids, vectors, keys)


def matches(filter: dict, children: Children) -> np.ndarray:
    """The rows a case's filter keeps, read from the filter itself (not its ``keeps``)."""
    keep = np.ones(len(children.ids), dtype=bool)
    for key, cond in filter.items():
        column = children.keys[key]
        if not isinstance(cond, dict):
            keep &= column == cond
        elif "$in" in cond:
            keep &= np.isin(column, cond["$in"])
        else:
            keep &= (column >= cond["$gte"]) & (column < cond["$lt"])
    return keep


@settings(max_examples=25, deadline=None)
@given(
    docs=st.lists(
        st.tuples(st.integers(1, 400), st.integers(0, len(PACKAGES) - 1)), min_size=30, max_size=120
    ),
    i=st.integers(0, 200),
)
def test_a_case_keeps_what_its_filter_says_and_about_its_share(docs, i):
    sizes, packages = [n for n, _ in docs], [p for _, p in docs]
    children = collection(sizes, packages)
    cases = RealCases(children)
    assert cases.total == sum(sizes)
    for kind in KINDS:
        for permille in SELECTIVITIES:
            case = cases.case(kind, permille, i)
            if case is None:
                assert kind == "equality"
                continue
            kept = case.keeps(children)
            said = matches(case.filter, children)
            if case.scope is not None:
                assert case.scope == REAL_SCOPE
                said &= matches(case.scope, children)
            np.testing.assert_array_equal(kept, said)
            target = cases.total * permille / 1000
            if kind == "equality":
                assert target / 2 <= kept.sum() <= 2 * target
            elif kind == "in":
                ids = case.filter["document_id"]["$in"]
                assert len(ids) <= 1000 and ids == sorted(set(ids))
                # Documents are drawn until they hold the target: the last one drawn may
                # overshoot it by at most its own size.
                assert kept.sum() >= min(target, cases.total) or len(ids) == 1000
                assert kept.sum() < target + max(sizes)
            elif kind == "range":
                assert min(target, cases.total) <= kept.sum() < target + max(sizes)


def test_an_equality_the_data_cannot_make_is_left_out():
    # One document of each of two packages: nothing keeps 0.1 % within 2×.
    children = collection([500, 500], [2, 3])
    assert RealCases(children).case("equality", 1, 0) is None


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown filter kind"):
        RealCases(collection([10, 20, 30], [0, 1, 2])).case("prefix", 10, 0)
