"""The predicates of a search's statements: the child predicate, a partition key's
value, and the metadata filter in the form each plan reads it.

:func:`filter_where` writes them for one form; :func:`compiled_where` for the form the
planner estimates, with the filter's SQL text and values, which a store's
:class:`~parrot_parents.stores.postgres.search.filter_shapes.FilterShapes` keeps per
filter structure; :func:`lexical_where` for an index plan's lexical branch.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from sqlalchemy import ColumnElement, Table, text
from sqlalchemy.engine import Dialect

from parrot_parents.stores.filters import compile_filter, filter_params, named_keys
from parrot_parents.stores.partition_keys import PartitionValue
from parrot_parents.stores.postgres.collections.partitions import partition_clause, unindexed
from parrot_parents.stores.postgres.search.filter_shapes import CompiledFilter, FilterShapes
from parrot_parents.stores.postgres.search.request import SearchRequest
from parrot_parents.stores.postgres.search.target_filter import searched_filter
from parrot_parents.stores.records.markers import SEARCH_PREDICATE

__all__ = ["compiled_where", "filter_where", "lexical_where"]


def filter_where(
    table: Table,
    request: SearchRequest,
    targets: bool = False,
    few: bool = True,
    partition: tuple[str, PartitionValue] | None = None,
    keyed: AbstractSet[str] = frozenset(),
    scanned: bool = False,
    checked: AbstractSet[str] = frozenset(),
    lists: dict[str, int] | None = None,
    compiled: ColumnElement[bool] | None = None,
) -> list[Any]:
    """The search's predicates: the child predicate, the predicate of a partition key's
    value (``partition``: the key and the value, written into the statement) and the
    compiled filter (always last).

    ``targets``: the filter reads hierarchy keys and the collection has indexed rows,
    so an indexed row is judged by its target's metadata, in the form for few kept
    rows or for an index scan (``few``;
    :func:`~parrot_parents.stores.postgres.search.target_filter.searched_filter`).
    With ``partition``, the filter is checked on the rows the value's indexes yield,
    in a form no metadata index serves
    (:func:`~parrot_parents.stores.postgres.collections.partitions.unindexed`). ``keyed``:
    the collection's filter keys
    (:mod:`~parrot_parents.stores.postgres.collections.filter_keys`). ``scanned``: the
    predicates of a dense branch ranked through the HNSW index, the filter checked on the
    rows it yields: in the form no metadata index serves, so that no bitmap scan of the
    rows the filter keeps can replace the ranked scan. ``checked``: keys whose conditions
    are in that form alone (``FilterPlan.checked``: an exact ranking reads the rows the
    other keys' indexes yield, and checks them). ``lists``: filled with the compiled
    filter's long lists (``compile_filter``'s), when it is compiled plainly.
    ``compiled``: the filter already compiled in its plain form, or with ``checked``
    keys (:class:`~parrot_parents.stores.postgres.search.filter_shapes.FilterShapes`),
    put last as it is."""
    where: list[Any] = []
    if not request.include_parents:
        where.append(text(SEARCH_PREDICATE))
    if partition is not None:
        where.append(partition_clause(table.c.cmetadata, *partition))
    if compiled is not None:
        where.append(compiled)
    elif request.filter:
        flt = dict(request.filter)
        if partition is not None or (scanned and not targets):
            # Compiled with the same keys: its parameters are the plain filter's.
            where.append(compile_filter(unindexed(table.c.cmetadata), flt, keyed))
        elif targets:
            where.append(searched_filter(table, flt, few=few, keyed=keyed))
        else:
            where.append(
                compile_filter(
                    table.c.cmetadata,
                    flt,
                    keyed,
                    checked=checked,
                    checked_column=unindexed(table.c.cmetadata) if checked else None,
                    lists=lists,
                )
            )
    return where


def lexical_where(
    table: Table,
    request: SearchRequest,
    scanned: list[Any],
    keyed: AbstractSet[str],
    anded: AbstractSet[str] | tuple[str, ...],
) -> list[Any]:
    """The predicates of an index plan's lexical branch, checked on the children its
    lexemes' GIN index yields: ``scanned`` (the dense branch's, in the form no metadata
    index serves) without ``anded`` keys, else the filter with every key but those in
    that form, so that the planner ANDs the ``anded`` keys' bitmaps with the lexemes'
    (``FilterPlan.anded``)."""
    if not anded:
        return scanned
    checked = named_keys(request.filter or {}) - set(anded)
    return filter_where(table, request, keyed=keyed, checked=checked)


def compiled_where(
    table: Table,
    request: SearchRequest,
    dialect: Dialect,
    shapes: FilterShapes,
    targets: bool,
    keyed: AbstractSet[str],
    checked: AbstractSet[str] = frozenset(),
) -> tuple[list[Any], CompiledFilter]:
    """The predicates of a filtered search as its planner estimates them and an exact
    ranking reads them (:func:`filter_where`; ``checked`` keys as there), and the
    filter compiled: its SQL text, values and long lists, from ``shapes`` unless the
    filter is judged on indexed rows' targets (``targets``), whose form is built anew.

    Raises:
        ConfigurationError: a bad filter.
    """
    if targets:
        where = filter_where(table, request, targets=True, keyed=keyed)
        condition = where[-1]
        sql = str(condition.compile(dialect=dialect))
        return where, CompiledFilter(condition, sql, filter_params(condition), {})
    compiled = shapes.compile(table, request.filter or {}, dialect, keyed, checked=checked)
    return filter_where(table, request, compiled=compiled.where), compiled
