"""Filtered search that plans: the ranking is exact over the children a selective filter
keeps, and goes through the indexes for a broad one.

An HNSW scan ranks first and filters after: with a selective filter, pgvector's iterative
scan visits many tuples to find ``limit`` that pass (up to ``hnsw.max_scan_tuples``, and
it may stop short of ``limit``), while the few children that pass are read through the
metadata GIN index and ranked exactly in a few milliseconds (the row layout keeps their
vectors in the row: :mod:`parrot_parents.stores.layout`). So a filtered search first asks
PostgreSQL's planner how many children the filter keeps (``EXPLAIN`` of the filtered
rows: planning only, no row read, on the search's own connection), then:

* at most ``exact_below`` children (``FILTER_EXACT_BELOW``, 4,000, unless the store's
  :class:`~parrot_parents.stores.search_options.HNSWQueryOptions` say otherwise):
  **exact**. The distance is written so that no index can order it; the lexical branch
  is BM25 in SQL with every query lexeme bringing candidates (pg_textsearch's index
  would rank first and filter after, walking most of the collection);
* more: **index**. A dense search walks the HNSW index (iterative scan; sequential and
  bitmap scans are turned off for its statement); the lexical branch is the
  collection's own (pg_textsearch's index, filtering as it scans, or BM25 in SQL with
  the usual candidate rule); in ``hybrid`` mode the planner stays free, since the
  lexical branch needs the GIN bitmap scans;
* a dense or hybrid index search that returns fewer rows than asked for is run again
  exactly (**index, then exact**): the scan stopped short, or the filter keeps fewer
  children than asked for. Either way the exact ranking reads few rows. In ``hybrid``
  mode that is judged on the fused rows: a short dense branch that the lexical branch
  fills is not seen.

Where the threshold comes from: on the scale benchmark's 100k children
(``python -m benchmarks run filtered_plans``, docs/performance.md), exact ranking took
2.0 ms for a 1 % filter (1,054 children), 5.5 ms for 3 % and 31 ms for 10 %; the
iterative scan at the default ``ef_search`` 56, 41 and 4.2 ms. The two cross between
3,000 and 10,000 children, and the scan's cost depends on the filter's share rather than
the collection's size, so the threshold is a number of children, on the exact side of
the crossing.

The estimate is the planner's, from the collection's statistics (``ANALYZE``): a filter
they describe badly can take the slower plan, never a wrong answer, since both plans
rank the filter's children. Each filtered search's plan rides on its results
(:attr:`~parrot_parents.stores.results.SearchResult.filter_plan`) into
``meta["filter_plan"]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from sqlalchemy import Select, Table, literal_column, select
from sqlalchemy.engine import Dialect

from parrot_parents.stores.prepared import Prepared
from parrot_parents.stores.search_options import FILTER_EXACT_BELOW

__all__ = ["FilterPlan", "FilterSearch", "estimate_statement", "estimated_rows"]

FilterSearch = Literal["exact", "index", "index, then exact"]


@dataclass(frozen=True)
class FilterPlan:
    """How one filtered search ranked.

    Attributes:
        estimate: children the planner expected the filter to keep.
        search: ``exact`` (every child the filter keeps compared with the query),
            ``index`` (the HNSW iterative scan), or ``index, then exact`` (the scan
            returned fewer rows than asked for, and the exact ranking ran after it).
        exact_below: the threshold the estimate was compared with.
    """

    estimate: int
    search: FilterSearch
    exact_below: int = FILTER_EXACT_BELOW

    @classmethod
    def for_estimate(cls, estimate: int, exact_below: int = FILTER_EXACT_BELOW) -> FilterPlan:
        """``exact`` for at most ``exact_below`` children, else ``index``."""
        return cls(estimate, "exact" if estimate <= exact_below else "index", exact_below)

    @property
    def exact(self) -> bool:
        """Whether the dense ranking is (now) exact."""
        return self.search != "index"

    def then_exact(self) -> FilterPlan:
        """This plan after an index search came back short."""
        return replace(self, search="index, then exact")

    def to_dict(self) -> dict[str, Any]:
        """``{"estimate", "search", "exact_below"}`` for ``meta``."""
        return asdict(self)


def estimate_statement(table: Table, where: list[Any], dialect: Dialect) -> Prepared:
    """``EXPLAIN (FORMAT JSON)`` of the children of ``table`` that ``where`` keeps, for
    :func:`estimated_rows`; prepared once per filter structure, the filter's values bound
    at each run (PostgreSQL plans the explained statement with them).

    Args:
        table: the collection table.
        where: the search's predicates (the child predicate, the compiled filter).
        dialect: the engine's dialect (asyncpg).
    """
    rows: Select[Any] = (
        select(literal_column("1")).select_from(table).where(table.c.embedding.is_not(None), *where)
    )
    counted = Prepared.compile(rows, dialect)
    return Prepared(f"EXPLAIN (FORMAT JSON) {counted.sql}", counted.names)


def estimated_rows(explained: Sequence[Any]) -> int:
    """The planner's estimate of the rows of an :func:`estimate_statement`, from its
    result (one row: the plan as JSON, decoded or not); it planned, and read no row."""
    plan = explained[0][0]
    if isinstance(plan, str):
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])
