"""Filtered search that plans: the ranking is exact over the children a selective filter
keeps, and goes through the indexes for a broad one.

An HNSW scan ranks first and filters after, so a selective filter makes it walk far (and
it may stop short of ``limit``), while the few children that pass are ranked exactly in a
few milliseconds. A filtered search asks the planner (``EXPLAIN``, planning only) how many
children the filter keeps and how many the collection has, then ranks:

* **exact** at most :func:`threshold` children (``exact_below``, 4,000 by default, up to
  100,000 children; growing as the size to the power 0.6 above: 15,900 at a million);
  an exact ranking that reads ``threshold + 1`` rows falls back to the indexes
  (**exact, then index**);
* **index** above it; an index search that returns fewer rows than asked for is run again
  exactly (**index, then exact**).

A range or pattern on a metadata key has no planner statistics, unless the key is a
filter key (:mod:`~parrot_parents.stores.postgres.collections.filter_keys`, for its
ranges): a table sample (:func:`sample_statement`) counts it instead, and it is ranked
exactly only below :func:`scan_ceiling`. Through the indexes, the lexical branch's
candidate rule is widened by how few children the filter keeps (:func:`widened`). The
plan rides on the results into ``meta["filter_plan"]``. The measurements behind the
threshold and the ceiling: docs/performance.md, "Filtered search".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from sqlalchemy import Float, Select, Table, and_, bindparam, func, literal_column, select
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.util import ClauseAdapter

from parrot_parents.stores.postgres.connections.prepared import SAMPLE_PERCENT, Prepared
from parrot_parents.stores.postgres.search.hybrid import (
    CandidateRule,
    scaled_rule,
    subset_scale,
)
from parrot_parents.stores.search_options import FILTER_EXACT_BELOW

__all__ = [
    "CHECKED_ABOVE",
    "LISTED_VALUE_ROWS",
    "MAX_WIDENING",
    "SAMPLE_ROWS",
    "SCAN_MARGIN",
    "THIN_LISTS",
    "THRESHOLD_AT",
    "THRESHOLD_GROWTH",
    "FilterPlan",
    "FilterSearch",
    "checked_keys",
    "estimate_statement",
    "estimated_rows",
    "lexical_anded",
    "part_rows",
    "sample_percent",
    "sample_statement",
    "sampled_rows",
    "scan_ceiling",
    "thinned",
    "threshold",
    "widened",
]

FilterSearch = Literal[
    "exact",
    "index",
    "index, then exact",
    "exact, then index",
    "exact, then index, then exact",
    "partition",
    "partition, then exact",
]

#: The collection size up to which the threshold is ``exact_below`` itself, and the
#: power of the size it grows with above that (module docstring).
THRESHOLD_AT = 100_000
THRESHOLD_GROWTH = 0.6
#: About how many rows of the collection a sampled estimate reads.
SAMPLE_ROWS = 2_000
#: How many times a search's limit an index scan should expect to meet within its bound
#: for a filter read by a scan of the table to go through the index (:func:`scan_ceiling`).
SCAN_MARGIN = 4


@dataclass(frozen=True)
class FilterPlan:
    """How one filtered search ranked.

    Attributes:
        estimate: children the planner expected the filter to keep.
        search: ``exact`` (every child the filter keeps compared with the query),
            ``index`` (the HNSW iterative scan), ``index, then exact`` (the scan
            returned fewer rows than asked for, and the exact ranking ran after it), or
            ``exact, then index`` (the estimate was under the threshold, but the exact
            attempt read more than the threshold's rows: the indexes ranked; with
            ``, then exact`` after it when their scan came back short).
        exact_below: the threshold the estimate was compared with (:func:`threshold`,
            or the lower :func:`scan_ceiling` of a sampled filter).
        children: the planner's estimate of the collection's children, which the
            threshold grows with.
        sampled: the estimate was counted on a sample of the table
            (:func:`sample_statement`), the filter holding a condition the planner has no
            statistics for.
        partition_index: the index of the partition key's value the search ranked
            through (``search`` is then ``partition``, or ``partition, then exact`` when
            it returned fewer rows than asked for; ``estimate`` is 0: none is asked for),
            else None
            (:mod:`~parrot_parents.stores.postgres.collections.partitions`).
        checked: keys of a filter on several keys whose conditions an exact ranking checks
            on the rows it reads, instead of reading their index: each keeps more than
            :data:`CHECKED_ABOVE` times what the narrowest key's conditions keep
            (:func:`checked_keys`); empty when every index is read.
        anded: filter keys whose conditions an index plan's lexical branch reads through
            their index, ANDed with the query lexemes' (:func:`lexical_anded`); the
            filter's other conditions are checked on the children that yields. Empty: the
            whole filter is checked on the children holding a query lexeme (and always
            for a dense search, which has no lexical branch).
    """

    estimate: int
    search: FilterSearch
    exact_below: int = FILTER_EXACT_BELOW
    children: int = 0
    sampled: bool = False
    partition_index: str | None = None
    checked: tuple[str, ...] = ()
    anded: tuple[str, ...] = ()

    @classmethod
    def for_partition(cls, index: str) -> FilterPlan:
        """A search ranked through the partial index ``index`` of a partition key's value."""
        return cls(0, "partition", partition_index=index)

    @classmethod
    def for_estimate(
        cls,
        estimate: int,
        children: int = 0,
        exact_below: int = FILTER_EXACT_BELOW,
        *,
        sampled: bool = False,
        ceiling: int | None = None,
    ) -> FilterPlan:
        """``exact`` for at most :func:`threshold` children (or ``ceiling``, when lower:
        :func:`scan_ceiling`), else ``index``."""
        below = threshold(exact_below, children)
        if ceiling is not None:
            below = min(below, ceiling)
        search: FilterSearch = "exact" if estimate <= below else "index"
        return cls(estimate, search, below, children, sampled)

    @property
    def exact(self) -> bool:
        """Whether the dense ranking is (now) exact."""
        return self.search.endswith("exact")

    @property
    def ranks_kept_rows(self) -> bool:
        """Whether the lexical branch ranked only the rows the filter keeps, in SQL: an
        exact ranking, or a partition key's value through its own GIN index."""
        return self.exact or self.search.startswith("partition")

    @property
    def lexical_scale(self) -> int:
        """The children over the estimate of those the filter keeps, rounded to a power of
        two (1 to 1024): how much wider the lexical branch's candidate rule is made when
        it ranks through the indexes (:func:`widened`)."""
        return subset_scale(self.children, self.estimate)

    def then_index(self) -> FilterPlan:
        """This plan after its exact attempt read more than the threshold's rows."""
        return replace(self, search="exact, then index")

    def then_exact(self) -> FilterPlan:
        """This plan after an index search came back short."""
        search: FilterSearch = (
            "exact, then index, then exact"
            if self.search == "exact, then index"
            else "partition, then exact"
            if self.search == "partition"
            else "index, then exact"
        )
        return replace(self, search=search)

    def to_dict(self) -> dict[str, Any]:
        """``{"estimate", "search", "exact_below", "children", "sampled"}`` for
        ``meta``, ``"partition_index"`` when the search ranked through one, and
        ``"checked"`` and ``"anded"`` (lists of keys) when they are not empty."""
        out = asdict(self)
        if self.partition_index is None:
            del out["partition_index"]
        for name in ("checked", "anded"):
            if out[name]:
                out[name] = list(out[name])
            else:
                del out[name]
        return out


#: How many times the rows kept by the narrowest key's conditions another key's
#: conditions may keep and still be read through their index by an exact ranking
#: (:func:`checked_keys`).
CHECKED_ABOVE = 16


def checked_keys(rows: Mapping[str, int]) -> tuple[str, ...]:
    """The keys, of a filter's conditions on several keys, that an exact ranking checks on
    the rows it reads instead of reading through their index: those whose conditions keep
    more than :data:`CHECKED_ABOVE` times the rows of the narrowest key's (``rows``: the
    planner's estimate for each key's conditions alone), sorted.

    The planner ANDs the bitmap of every condition's index, and costs a bitmap of many
    rows low: a scope on a key of two values read half of its index, and took 65 ms of a
    147 ms exact ranking at a million children (51 ms without it). Reading a row the
    narrow condition keeps cost about 25 times as much as putting a row into a bitmap
    (2.9 against 0.11 µs at 100k children, one run of ``EXPLAIN ANALYZE``), so the AND
    pays only while the wide bitmap holds fewer than about 25 times the narrow one's
    rows; 16 leaves room for what the AND saves shrinking as the wide key keeps more."""
    if len(rows) < 2:
        return ()
    narrowest = max(min(rows.values()), 1)
    return tuple(sorted(k for k, n in rows.items() if n > CHECKED_ABOVE * narrowest))


#: What one value of a key's ``$in`` list costs the bitmap of the key's B-tree, in rows
#: of it (:func:`lexical_anded`): the list's values are looked up one by one, 9 to 13 µs
#: each at 100k children and 17 to 28 µs at a million, where a range's bitmap took about
#: 0.075 µs a row (``EXPLAIN ANALYZE`` of lists of 10 to 500 values of ``rank`` against
#: ranges keeping as many rows).
LISTED_VALUE_ROWS = 128


def lexical_anded(
    rows: Mapping[str, int], budget: int, listed: Mapping[str, int] | None = None
) -> tuple[str, ...]:
    """The filter keys whose conditions an index plan's lexical branch reads through
    their B-tree, ANDed with the lexemes' GIN bitmap, instead of checking them on every
    child holding a query lexeme; sorted. ``rows``: the planner's estimate of each key's
    conditions alone; ``budget``: the widened candidate rule's budget of expected
    children (:func:`widened`); ``listed``: how many values each key's ``$in`` lists
    hold.

    A key is ANDed when its bitmap costs at most :data:`CHECKED_ABOVE` times ``budget``
    rows of it (its rows, and :data:`LISTED_VALUE_ROWS` a listed value), and it is not
    many times wider than the narrowest key (:func:`checked_keys`). Checking the filter
    on the candidates reads each of them from the table; the AND reads only those the
    filter keeps, for the price of the bitmap. By the cost ratio :func:`checked_keys`
    rests on, that pays while the bitmap holds fewer rows than about 25 times the
    candidates. Measured side by side with the filter checked on every candidate
    (benchmarks/reports/filters.md, "The lexical branch ANDs narrow keys"): with the
    package defaults, ranges and lists keeping 5 % of 100k or of 1M children, and a
    range keeping 20 % of 100k, ranked faster ANDed; a list of 200 values keeping 20 %
    of 100k slower, and keys keeping 20 % or 50 % of 1M (bitmaps of 200,000 to 500,000
    rows) 1.2 to 3.2 times slower."""
    wide = set(checked_keys(rows))
    most = CHECKED_ABOVE * budget
    values = listed or {}
    return tuple(
        sorted(
            k
            for k, n in rows.items()
            if n + LISTED_VALUE_ROWS * values.get(k, 0) <= most and k not in wide
        )
    )


#: The most a filter widens the lexical branch's candidate rule (:func:`widened`).
MAX_WIDENING = 8


def widened(rule: CandidateRule, scale: int) -> CandidateRule:
    """``rule`` for a filter keeping one child in ``scale``, ranked through the indexes:
    its budgets of expected children times ``scale`` (at most :data:`MAX_WIDENING`), no
    cap, and its candidates found apart from their scoring (``CandidateRule.fenced``),
    through the lexemes' GIN index and the indexes of the keys the plan ANDs
    (:func:`lexical_anded`).

    The rule counts children over the whole collection, so a filter leaves it few of the
    kept ones to score: without the widening, a filter keeping 5 % of 100k children found
    0.83 of exact BM25's top 10 over the kept children. Without a key ANDed, every
    candidate is read to check the filter, so the cost grows with the widening: at 5 %,
    widened 16 times it found 1.000 at 3.3 times the unfiltered search's p50, 8 times
    0.997 at 2.0 times, 4 times 0.947 at 1.6 times (docs/performance.md, "Filters at
    every selectivity"). A partition
    key's value widens it fully
    (:meth:`~parrot_parents.stores.postgres.collections.partitions.FixedPartition.candidates`):
    its own GIN index holds only its rows."""
    return replace(scaled_rule(rule, max(1, min(scale, MAX_WIDENING))), fenced=True)


def threshold(exact_below: int, children: int) -> int:
    """The most children a filter may keep and be ranked exactly, in a collection of
    ``children``: ``exact_below`` up to :data:`THRESHOLD_AT` children, and
    ``exact_below * (children / THRESHOLD_AT) ** THRESHOLD_GROWTH`` above (see the
    module docstring for the measurements behind it)."""
    return int(exact_below * max(1.0, children / THRESHOLD_AT) ** THRESHOLD_GROWTH)


def scan_ceiling(children: int, limit: int, bound: int) -> int:
    """The most children a filter read by a scan of the table may keep and be ranked
    exactly, in a collection of ``children``, for a search of ``limit`` rows whose index
    scan visits at most ``bound`` tuples (``HNSWQueryOptions.max_scan_tuples``).

    A range or a pattern that nothing else in the filter bounds (a sampled filter) has no
    index to read its children through: its exact ranking reads the whole table, whatever
    it keeps. The index scan meets the filter's children at about their share of the
    tuples it visits, so it is expected to find :data:`SCAN_MARGIN` times ``limit`` of
    them within its bound when the filter keeps more than this; below it, the scan would
    likely come back short and the exact ranking follow it anyway."""
    return SCAN_MARGIN * limit * children // max(bound, 1)


def estimate_statement(
    table: Table,
    where: list[Any],
    dialect: Dialect,
    *,
    with_vector: bool = True,
    parts: Sequence[Any] = (),
) -> Prepared:
    """``EXPLAIN (FORMAT JSON)`` of the children of ``table`` that ``where`` keeps, of
    all its rows with a vector (the collection's children: the planner knows their count
    from the column's statistics, where it can only guess the share of the child predicate),
    and of the rows ``where`` keeps without its last predicate (the filter), in one
    statement, for :func:`estimated_rows`; prepared once per filter structure, the
    filter's values bound at each run (PostgreSQL plans the explained statement with them).

    Args:
        table: the collection table.
        where: the search's predicates (the child predicate, the compiled filter).
        dialect: the engine's dialect (asyncpg).
        with_vector: count only the kept rows with a vector (the rows a search ranks).
            False where ``where`` names the rows that indexed rows stand for, which are
            stored without one (:mod:`~parrot_parents.stores.postgres.search.target_filter`).
        parts: conditions estimated alone, each in a branch after the three
            (:func:`part_rows`); their parameters must not share names with ``where``'s.
    """
    has_vector = table.c.embedding.is_not(None)
    kept: Select[Any] = select(literal_column("1")).select_from(table).where(*where)
    if with_vector:
        kept = kept.where(has_vector)
    every: Select[Any] = select(literal_column("1")).select_from(table).where(has_vector)
    searched: Select[Any] = select(literal_column("1")).select_from(table).where(*where[:-1])
    if with_vector:
        searched = searched.where(has_vector)
    alone: list[Select[Any]] = [
        select(literal_column("1")).select_from(table).where(has_vector, part) for part in parts
    ]
    counted = Prepared.compile(kept.union_all(every, searched, *alone), dialect)
    return Prepared(f"EXPLAIN (FORMAT JSON) {counted.sql}", counted.names)


def estimated_rows(explained: Sequence[Any], parts: int = 0) -> tuple[int, int]:
    """The planner's estimates ``(kept, children)`` of an :func:`estimate_statement`,
    from its result (one row: the plan as JSON, decoded or not); it planned, and read no
    row. A filter the planner knows keeps nothing (``{"$in": []}``) leaves its branch out
    of the plan: ``(0, children)``. ``parts``: the statement's branches of conditions
    estimated alone (:func:`part_rows`).

    ``kept`` is the filter's share of the searched rows times ``children``: the planner
    takes the child predicate to keep a share of the rows it guesses (about half), and
    multiplies it into the kept rows' estimate as if the filter were independent of it;
    divided out, the estimate is the filter's own (at 100k children, a value kept by 5 %
    of them was estimated at 2,577 children for 4,986 with it in, 5,100 without)."""
    plan = explained[0][0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    top = plan[0]["Plan"]
    branches = top.get("Plans", []) if top.get("Node Type") == "Append" else []
    rows = [int(b["Plan Rows"]) for b in branches]
    if len(rows) == 3 + parts:
        kept, children, searched = rows[:3]
        return round(kept * children / max(searched, 1)), children
    if rows:
        # The kept rows' branch left out, the filter keeping nothing (and any part that
        # keeps nothing with it); the collection's branch holds the most rows.
        return 0, max(rows)
    return 0, int(top["Plan Rows"])


def part_rows(explained: Sequence[Any], parts: int) -> list[int] | None:
    """The planner's estimates of the ``parts`` conditions of an
    :func:`estimate_statement`, in order; None when its plan does not hold a branch for
    each (a branch the planner knows keeps nothing is left out of it)."""
    plan = explained[0][0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    top = plan[0]["Plan"]
    branches = top.get("Plans", []) if top.get("Node Type") == "Append" else []
    if len(branches) != 3 + parts:
        return None
    return [int(b["Plan Rows"]) for b in branches[3:]]


#: The most values of a list the planner is asked to estimate (:func:`thinned`).
THIN_LISTS = 16


def thinned(args: Mapping[str, Any], lists: Mapping[str, int]) -> tuple[dict[str, Any], float]:
    """``args`` (a compiled filter's parameters) with each of its ``lists`` (parameter
    name: number of values; ``compile_filter``'s) longer than :data:`THIN_LISTS` cut to
    every n-th value, at most :data:`THIN_LISTS` of them, and how many times more rows
    the full lists keep than the cut ones, in the planner's model.

    The planner estimates an ``$in`` on a filter key value by value against the key's
    most common values: for 500 values of a key of 1,000, planning the estimate took
    6.6 ms, against 0.45 ms for 10. It adds the values' shares, and multiplies the
    filter's other ANDed conditions in, so a list ANDed at the filter's top level keeps
    in proportion to its length."""
    run = dict(args)
    scale = 1.0
    for name, n in lists.items():
        if n > THIN_LISTS and name in run:
            step = -(-n // THIN_LISTS)
            run[name] = list(run[name])[::step]
            scale *= n / len(run[name])
    return run, scale


def sample_percent(children: int) -> float:
    """The share of the table's blocks, in percent, that holds about
    :data:`SAMPLE_ROWS` of a collection of ``children`` (all of a small one)."""
    return min(100.0, 100.0 * SAMPLE_ROWS / max(children, 1))


def sample_statement(table: Table, where: list[Any], dialect: Dialect) -> Prepared:
    """The count of the rows with a vector that ``where`` keeps, and of all the rows with
    a vector, in a ``TABLESAMPLE SYSTEM`` of :data:`SAMPLE_PERCENT` percent of the
    table's blocks (``REPEATABLE``: the same blocks each time, so one filter gets one
    plan), for :func:`sampled_rows`. For a filter whose conditions the planner cannot
    estimate (:func:`~parrot_parents.stores.filters.has_unestimated`); ``where`` must
    read only the table's own row (no subquery over the table).
    """
    percent = bindparam(SAMPLE_PERCENT, type_=Float)
    sample = table.tablesample(func.system(percent), name="sample", seed=literal_column("0"))
    adapt = ClauseAdapter(sample)
    has_vector = sample.c.embedding.is_not(None)
    kept = and_(has_vector, *(adapt.traverse(w) for w in where))
    counted = select(func.count().filter(kept), func.count().filter(has_vector)).select_from(sample)
    return Prepared.compile(counted, dialect)


def sampled_rows(counted: Sequence[Any], children: int) -> int | None:
    """The children a filter keeps, scaled from a :func:`sample_statement`'s counts to
    ``children`` (the planner's count); None when the sample held no child."""
    kept, every = int(counted[0][0]), int(counted[0][1])
    if every == 0:
        return None
    return round(kept * children / every)
