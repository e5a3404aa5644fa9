"""The rows a selective metadata filter keeps, read once for an exact ranking, and no
further than the plan's threshold.

The planner guesses a range or pattern on a metadata key to keep well under 1 % of the
rows, so an exact ranking chosen on that guess could read most of the collection. The
exact attempt reads at most ``threshold + 1`` kept rows (:data:`KEPT_LIMIT`) and says
whether it read that many (:func:`over_cap`); then the search goes through the indexes.
The rows are a ``MATERIALIZED`` CTE, so each branch of a hybrid search ranks them from one
read. Measured: docs/performance.md, "A filter the planner takes for selective".
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
