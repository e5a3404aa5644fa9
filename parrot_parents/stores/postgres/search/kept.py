"""The rows a selective metadata filter keeps, read once for an exact ranking, and no
further than the plan's threshold.

An exact ranking (:mod:`~parrot_parents.stores.postgres.search.filter_plan`) compares the query with
every child the filter keeps. It is chosen on the planner's estimate of that count, and
the planner guesses where it has no statistics: a range or pattern on a metadata key
(``{"year": {"$gte": 2000}}``) is a condition on an expression over the ``jsonb``
column, which it takes to keep a fixed fraction of the rows (well under 1 % for the
type-guarded range). A filter that keeps most of the collection would then be ranked
over every row it keeps: 130 ms at 100k children, seconds at a million.

So the first, exact, attempt reads at most ``threshold + 1`` kept rows (the bound
parameter :data:`KEPT_LIMIT`), and the statement says whether it read that many
(:func:`over_cap`). If it did, the filter keeps more children than an exact ranking is
for, its answer is not used, and the search goes through the indexes. A wrong estimate
then costs the read of ``threshold + 1`` rows, not of every row the filter keeps (rows
scattered through the table may take a scan of much of it to find, as the exact ranking
did). When it read fewer, they are every row the filter keeps, and the ranking over them
is exact. Measured in docs/performance.md ("A filter the planner takes for selective").

The rows are a ``MATERIALIZED`` CTE: each branch of a hybrid search ranks them from one
read (the lexical branch checks their tsvectors instead of reading the GIN index's list
of every child holding a common query word), and the planner cannot fold the branches'
conditions back into the scan.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, Table, bindparam, func, select

from parrot_parents.stores.postgres.connections.prepared import KEPT_LIMIT
from parrot_parents.stores.postgres.search.hybrid import query_vector

__all__ = ["KEPT_LIMIT", "kept_rows", "over_cap"]


def kept_rows(table: Table, where: list[Any], *, lexical: bool, vector: bool, capped: bool) -> Any:
    """The rows ``where`` keeps, as a ``MATERIALIZED`` CTE ``kept`` of ``id``, with
    ``lexical`` (the tsvector) and ``distance`` (cosine distance to the bound
    ``query_vector``; NULL for a row without a vector) when asked for.

    Args:
        table: the collection table.
        where: the search's predicates (child predicate, compiled filter).
        lexical: a lexical branch ranks the rows.
        vector: a dense branch ranks the rows (binds ``query_vector``).
        capped: read at most :data:`KEPT_LIMIT` rows (bound at each run): the first
            attempt of an exact plan. Uncapped, every row the filter keeps (an exact
            ranking after an index scan that came back short).
    """
    columns: list[Any] = [table.c.id]
    if lexical:
        columns.append(table.c.lexical)
    if vector:
        columns.append(table.c.embedding.cosine_distance(query_vector(table)).label("distance"))
    rows = select(*columns).where(*where)
    if vector and not lexical:
        # A dense ranking ranks only rows with a vector; the cap counts the same rows.
        rows = rows.where(table.c.embedding.is_not(None))
    if capped:
        rows = rows.limit(bindparam(KEPT_LIMIT, type_=Integer))
    return rows.cte("kept").prefix_with("MATERIALIZED")


def over_cap(kept: Any) -> Any:
    """The condition that a capped :func:`kept_rows` read :data:`KEPT_LIMIT` rows: the
    filter keeps more than the threshold, and the ranking over them is not exact."""
    counted = select(func.count()).select_from(kept).scalar_subquery()
    return counted >= bindparam(KEPT_LIMIT, type_=Integer)
