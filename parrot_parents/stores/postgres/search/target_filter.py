"""A search's metadata filter holds for the rows the search returns.

An indexed row (:mod:`parrot_parents.stores.resolve`) copies its target's metadata but not
the hierarchy keys (:data:`~parrot_parents.stores.records.markers.NOT_SHARED_WITH_INDEXED`),
so a filter reading one of those keys (:func:`reads_hierarchy`) is judged on the target::

    (row is not indexed AND filter(row))
    OR (row is indexed AND coalesce((SELECT filter(target) ... WHERE target.id = row.indexes),
                                    false))

For an exact ranking (:mod:`~parrot_parents.stores.postgres.search.filter_plan`) the same
rows are named by id (``row.id IN (...)``), so the planner starts from the metadata GIN
index. Any other filter is the plain condition on the row. Costs: docs/performance.md,
"Filters on hierarchy keys, through indexed rows".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Table,
    and_,
    false,
    func,
    literal_column,
    not_,
    or_,
    select,
    text,
    union_all,
)

from parrot_parents.stores.filters import compile_filter
from parrot_parents.stores.records.markers import (
    CHILD_PREDICATE,
    INDEXED_MARKER,
    INDEXES,
    NOT_INDEXED_PREDICATE,
    NOT_SHARED_WITH_INDEXED,
)

__all__ = ["filter_keys", "reads_hierarchy", "searched_filter", "targets_kept"]


def filter_keys(filter: Any) -> Iterator[str]:
    """The metadata keys a filter (:mod:`parrot_parents.stores.filters`) reads, at any
    depth of ``$and``/``$or``/``$not``."""
    if isinstance(filter, Mapping):
        for key, value in filter.items():
            if str(key).startswith("$"):
                yield from filter_keys(value)
            else:
                yield str(key)
    elif isinstance(filter, list):
        for item in filter:
            yield from filter_keys(item)


def reads_hierarchy(filter: Any) -> bool:
    """Whether ``filter`` reads a key whose value on an indexed row is not its target's."""
    return bool(filter) and not NOT_SHARED_WITH_INDEXED.isdisjoint(filter_keys(filter))


def searched_filter(
    table: Table,
    filter: Mapping[str, Any],
    *,
    few: bool = True,
    keyed: AbstractSet[str] = frozenset(),
) -> ColumnElement[bool]:
    """``filter`` as the condition on the rows a search ranks (module docstring).

    Args:
        table: the collection table.
        filter: a filter (:mod:`parrot_parents.stores.filters`).
        few: the form for a filter that keeps few rows (its estimate, and an exact
            ranking): the ids it keeps, a semi-join the planner drives from the metadata
            GIN index, through the targets to the indexed rows that stand for them. False:
            the form for an index scan, checked row by row as the scan meets them (one
            primary-key lookup for an indexed row), where the list of ids could be most of
            the collection.
        keyed: the collection's filter keys (:func:`~parrot_parents.stores.filters.compile_filter`).

    Raises:
        ConfigurationError: a bad filter (:func:`~parrot_parents.stores.filters.compile_filter`).
    """
    if not reads_hierarchy(filter):
        return compile_filter(table.c.cmetadata, filter, keyed)
    target = table.alias("target")
    # Compiled again over the target's column: the same parameter names and values.
    on_target = compile_filter(target.c.cmetadata, filter, keyed)
    if few:
        row = table.alias("own")
        standing = table.alias("standing")
        plain = select(row.c.id).where(
            not_(_indexed(row.c.cmetadata)), compile_filter(row.c.cmetadata, filter, keyed)
        )
        # Containment, so that the GIN index finds the rows standing for each target.
        through = (
            select(standing.c.id)
            .select_from(target)
            .join(
                standing,
                standing.c.cmetadata.contains(func.jsonb_build_object(INDEXES, target.c.id)),
            )
            .where(not_(_indexed(target.c.cmetadata)), on_target)
        )
        return table.c.id.in_(union_all(plain, through))
    # The filter's value on the target row, read by primary key: a scalar subquery, which
    # PostgreSQL runs row by row; an EXISTS it may turn into a hash of every target the
    # filter keeps (most of the collection for a broad filter).
    reached = func.coalesce(
        select(on_target).where(target.c.id == table.c.cmetadata[INDEXES].astext).scalar_subquery(),
        false(),
    )
    indexed = _indexed(table.c.cmetadata)
    own = compile_filter(table.c.cmetadata, filter, keyed)
    return or_(and_(not_(indexed), own), and_(indexed, reached))


def _indexed(cmetadata: Any) -> ColumnElement[bool]:
    """The row is an indexed one (never NULL: a row without the key is not)."""
    # A constant written into the statement (its parameters are the filter's alone).
    marker: ColumnElement[Any] = literal_column(INDEXED_MARKER)
    indexed: ColumnElement[bool] = cmetadata.op("@>", return_type=Boolean)(marker)
    return indexed


def targets_kept(
    table: Table,
    filter: Mapping[str, Any],
    include_parents: bool,
    keyed: AbstractSet[str] = frozenset(),
) -> list[Any]:
    """The predicates of the rows that ``filter`` keeps among those indexed rows stand for
    (children, or every row but the indexed ones with ``include_parents``), for the
    planner's estimate of a filter through targets: it cannot estimate the join from the
    targets to the rows standing for them, and each target stands for about as many
    searched rows as a child is one. Count them without the vector condition: such a
    child is stored without one."""
    children = [] if include_parents else [text(CHILD_PREDICATE)]
    return [
        *children,
        text(NOT_INDEXED_PREDICATE),
        compile_filter(table.c.cmetadata, filter, keyed),
    ]
