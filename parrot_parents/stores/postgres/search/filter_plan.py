"""Filtered search that plans: the ranking is exact over the children a selective filter
keeps, and goes through the indexes for a broad one.

An HNSW scan ranks first and filters after: with a selective filter, pgvector's iterative
scan visits many tuples to find ``limit`` that pass (up to ``hnsw.max_scan_tuples``, and
it may stop short of ``limit``), while the few children that pass are read through the
metadata GIN index and ranked exactly in a few milliseconds (the row layout keeps their
vectors in the row: :mod:`parrot_parents.stores.postgres.collections.layout`). So a filtered search
first asks
PostgreSQL's planner how many children the filter keeps, and how many the collection
has (``EXPLAIN`` of both in one statement: planning only, no row read, on the search's
own connection), then:

* at most :func:`threshold` children: **exact**. The threshold is ``exact_below``
  (``FILTER_EXACT_BELOW``, 4,000, unless the store's
  :class:`~parrot_parents.stores.search_options.HNSWQueryOptions` say otherwise) in a
  collection of up to 100,000 children, and grows as the collection's size to the power
  0.6 above that (15,900 at a million). The dense and hybrid rankings read the kept
  children once (:mod:`~parrot_parents.stores.postgres.search.kept`), and compare each with the
  query
  (never through the HNSW index); in ``hybrid`` mode the lexical branch checks their
  tsvectors rather than read the GIN index's list of every child holding a common query
  word (a 1 % filter at a million children, a six-word question: 96 ms for the hybrid
  statement, against 205 to 330 ms with that list). The lexical branch is BM25 in SQL
  with every query lexeme bringing candidates (pg_textsearch's index would rank first
  and filter after, walking most of the collection); alone, it reads the children
  holding a query lexeme through the GIN index and checks the filter on them;
* an exact dense or hybrid ranking reads at most ``threshold + 1`` kept children. If it
  reads that many, the estimate was wrong (the planner guesses for a range or a pattern
  on a metadata key) and the search goes through the indexes instead (**exact, then
  index**): a wrong estimate costs the read of the threshold's rows, not of every child
  the filter keeps;
* more: **index**. A dense search walks the HNSW index (iterative scan; sequential and
  bitmap scans are turned off for its statement); the lexical branch is the
  collection's own (pg_textsearch's index, filtering as it scans, or BM25 in SQL with
  the usual candidate rule); in ``hybrid`` mode the planner stays free, since the
  lexical branch needs the GIN bitmap scans;
* a dense or hybrid index search that returns fewer rows than asked for is run again
  exactly (**index, then exact**): the scan stopped short, or the filter keeps fewer
  children than asked for. Either way the exact ranking reads few rows. In ``hybrid``
  mode that is judged on the fused rows: a short dense branch that the lexical branch
  fills is not seen. After an exact attempt that reached its cap, that is **exact, then
  index, then exact**, and the last ranking reads every child the filter keeps.

Where the threshold comes from (``python -m benchmarks run filtered_plans``, raw SQL on
the scale benchmark's tables, queries near sampled children, ``ef_search`` 100, warm
cache; docs/performance.md):

=========  ========  ==============  ====================  ========================
children   filter    kept            exact p50             HNSW p50 (recall@10)
=========  ========  ==============  ====================  ========================
100k       1 %       1,054           2.6 ms                16 ms (0.71)
100k       3 %       3,018           8.1 ms                7.2 ms (0.73)
100k       10 %      10,149          31 ms                 3.3 ms (0.95)
1M         1 %       9,953           31 ms                 75 ms (0.43)
1M         3 %       29,748          99 ms                 21 ms (0.47)
1M         10 %      99,851          211 ms                11 ms (0.63)
=========  ========  ==============  ====================  ========================

Exact ranking costs about 3 µs per child kept, whatever the collection's size; the
iterative scan gets slower, and finds fewer of the true neighbours, as the filter's
share of the collection falls. So the crossing is a number of children that grows with
the collection: between 3,000 and 10,000 at 100k (exact at 3,000 is as fast and finds
every neighbour), between 10,000 and 30,000 at a million. The threshold is 4,000 up to
100k children and grows as the size to the power 0.6 above (a cost model of exact
ranking against a scan whose cost goes as the share to the power -1.5; any power from
0.4 to 0.87 meets both measured crossings): 15,900 at a million, where a 1 % filter is
ranked exactly (31 ms and every true neighbour, against 75 ms and 0.43 through the
index) and a 3 % one through the index. Below 100k children the threshold stays 4,000:
exact ranking of so few is a few milliseconds.

The estimate is the planner's, from the collection's statistics (``ANALYZE``): a filter
they describe badly can take the slower plan, never a wrong answer, since both plans
rank the filter's children; one they take for selective costs at most the read of the
threshold's rows before the index plan. The planner has no statistics for a range or a
pattern on a metadata key (:data:`~parrot_parents.stores.filters.UNESTIMATED_OPERATORS`)
and takes it to keep a constant share of the rows, well under 1 %; when that share would
choose the exact plan, a sample of about :data:`SAMPLE_ROWS` rows of the table
(``TABLESAMPLE SYSTEM``, a few hundred blocks at a million children) counts what the
filter keeps instead (:func:`sample_statement`; ``sampled`` in the plan), unless the
filter's other conditions, ANDed with them, keep few enough by the planner's estimate
(:func:`~parrot_parents.stores.filters.estimated_part`: their count bounds the filter's,
and planning it costs less than reading the sample). A filter through indexed rows'
targets keeps the planner's estimate.

Nothing bounds such a sampled filter, so no index reads just its children: its exact
ranking reads the whole table (or the rows of the conditions it is ANDed with, which
keep more than the threshold), whatever it keeps (at 100k children, a range keeping 1,433:
57 to 79 ms, against 6.6 to 7.0 ms through the HNSW index with the same top 10 over 20
queries; at a million, a range keeping 14,238: 1.0 to 1.3 s against 18 ms). In a table
larger than the threshold, a dense or hybrid search then ranks it exactly only below
:func:`scan_ceiling`, where the HNSW scan would likely come back short; ``exact_below``
in the plan is that ceiling. (A hybrid search's lexical branch then goes through its own
index too: pg_textsearch's, which filters its top rows as it reads them, returns fewer
than asked for when the filter keeps few, and the dense branch fills the fused list.)

Each filtered search's plan rides on its results
(:attr:`~parrot_parents.stores.results.SearchResult.filter_plan`) into
``meta["filter_plan"]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from sqlalchemy import Float, Select, Table, and_, bindparam, func, literal_column, select
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.util import ClauseAdapter

from parrot_parents.stores.postgres.connections.prepared import SAMPLE_PERCENT, Prepared
from parrot_parents.stores.search_options import FILTER_EXACT_BELOW

__all__ = [
    "SAMPLE_ROWS",
    "SCAN_MARGIN",
    "THRESHOLD_AT",
    "THRESHOLD_GROWTH",
    "FilterPlan",
    "FilterSearch",
    "estimate_statement",
    "estimated_rows",
    "sample_percent",
    "sample_statement",
    "sampled_rows",
    "scan_ceiling",
    "threshold",
]

FilterSearch = Literal[
    "exact", "index", "index, then exact", "exact, then index", "exact, then index, then exact"
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
    """

    estimate: int
    search: FilterSearch
    exact_below: int = FILTER_EXACT_BELOW
    children: int = 0
    sampled: bool = False

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

    def then_index(self) -> FilterPlan:
        """This plan after its exact attempt read more than the threshold's rows."""
        return replace(self, search="exact, then index")

    def then_exact(self) -> FilterPlan:
        """This plan after an index search came back short."""
        search: FilterSearch = (
            "exact, then index, then exact"
            if self.search == "exact, then index"
            else "index, then exact"
        )
        return replace(self, search=search)

    def to_dict(self) -> dict[str, Any]:
        """``{"estimate", "search", "exact_below", "children", "sampled"}`` for
        ``meta``."""
        return asdict(self)


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
    table: Table, where: list[Any], dialect: Dialect, *, with_vector: bool = True
) -> Prepared:
    """``EXPLAIN (FORMAT JSON)`` of the children of ``table`` that ``where`` keeps and of
    all its rows with a vector (the collection's children: the planner knows their count
    from the column's statistics, where it can only guess the share of the child
    predicate), in one statement, for :func:`estimated_rows`; prepared once per filter
    structure, the filter's values bound at each run (PostgreSQL plans the explained
    statement with them).

    Args:
        table: the collection table.
        where: the search's predicates (the child predicate, the compiled filter).
        dialect: the engine's dialect (asyncpg).
        with_vector: count only the kept rows with a vector (the rows a search ranks).
            False where ``where`` names the rows that indexed rows stand for, which are
            stored without one (:mod:`~parrot_parents.stores.postgres.search.target_filter`).
    """
    has_vector = table.c.embedding.is_not(None)
    kept: Select[Any] = select(literal_column("1")).select_from(table).where(*where)
    if with_vector:
        kept = kept.where(has_vector)
    every: Select[Any] = select(literal_column("1")).select_from(table).where(has_vector)
    counted = Prepared.compile(kept.union_all(every), dialect)
    return Prepared(f"EXPLAIN (FORMAT JSON) {counted.sql}", counted.names)


def estimated_rows(explained: Sequence[Any]) -> tuple[int, int]:
    """The planner's estimates ``(kept, children)`` of an :func:`estimate_statement`,
    from its result (one row: the plan as JSON, decoded or not); it planned, and read no
    row. A filter the planner knows keeps nothing (``{"$in": []}``) leaves its branch out
    of the plan: ``(0, children)``."""
    plan = explained[0][0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    top = plan[0]["Plan"]
    branches = top.get("Plans", []) if top.get("Node Type") == "Append" else []
    if len(branches) == 2:
        return int(branches[0]["Plan Rows"]), int(branches[1]["Plan Rows"])
    return 0, int(top["Plan Rows"])


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
