"""A filter compiled once per skeleton: its SQL kept, its values read off each new filter.

A filtered search needs its filter's SQL text (the key of its prepared statements) and
its parameters' values on every call; building the SQLAlchemy condition and compiling it
to text took 0.15 to 0.4 ms a time for a scope ANDed with a range, several times a call.
Filters with one skeleton (:mod:`parrot_parents.stores.filter_skeleton`) compile to one
text whose parameters differ only in value, so :class:`FilterShapes` compiles a skeleton
once and then reads each parameter's value off the new filter's leaves.

Which leaves make a parameter is learned from a probe: the skeleton filled with values
found nowhere else (:func:`~parrot_parents.stores.filter_skeleton.probe`), compiled the
same way, so each parameter's value shows the leaves it holds (as they are, or as the
JSON text of an ``$in`` list's value). A skeleton is kept only when the values so read
off the first filter equal its own compilation's, and its SQL and lists agree; any other
filter (no skeleton, or a leaf the compiler may refuse) is compiled as before.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Table
from sqlalchemy.engine import Dialect

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.filter_skeleton import (
    MARK,
    Leaf,
    leaves_valid,
    probe,
    skeleton,
)
from parrot_parents.stores.filters import FILTER_PARAM_PREFIX, compile_filter, filter_params
from parrot_parents.stores.postgres.collections.partitions import unindexed

__all__ = ["CompiledFilter", "FilterShapes"]


@dataclass(frozen=True)
class CompiledFilter:
    """A filter compiled for one table.

    Attributes:
        where: the condition; its bound values may be those of an earlier filter of the
            same skeleton, so a statement built from it is run with :attr:`params`
            (statements bind a filter's values at each run: ``Prepared.args``).
        sql: its SQL text for the dialect, values as named parameters.
        params: this filter's values, by parameter name (``filter_params``' answer).
        lists: ``compile_filter``'s long lists (parameter name: length).
    """

    where: ColumnElement[bool]
    sql: str
    params: dict[str, Any]
    lists: dict[str, int]


# A parameter's value in terms of the leaves: ("leaf", i), ("json", i) (its JSON text),
# ("const", value), ("list", parts) or ("dict", ((key, part), ...)).
_Part = tuple[str, Any]


@dataclass(frozen=True)
class _Shape:
    where: ColumnElement[bool]
    sql: str
    lists: dict[str, int]
    parts: tuple[tuple[str, _Part], ...]


class FilterShapes:
    """Compiled filters of one store, by skeleton and settings (the table, the filter
    keys, the parameter prefix, the checked keys); the ``size`` most recently used kept
    (default 256)."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._shapes: OrderedDict[Hashable, _Shape] = OrderedDict()

    def compile(
        self,
        table: Table,
        filter: Mapping[str, Any],
        dialect: Dialect,
        keyed: AbstractSet[str] = frozenset(),
        prefix: str = FILTER_PARAM_PREFIX,
        checked: AbstractSet[str] = frozenset(),
    ) -> CompiledFilter:
        """``filter`` over ``table.c.cmetadata``, as ``compile_filter`` compiles it
        (``checked`` keys over ``unindexed(table.c.cmetadata)``), with its SQL text for
        ``dialect``.

        Raises:
            ConfigurationError: as ``compile_filter``.
        """
        found = skeleton(filter)
        if found is None:
            return self._fresh(table, filter, dialect, keyed, prefix, checked)
        shape_of, leaves = found
        key = (
            table.schema,
            table.name,
            shape_of,
            frozenset(keyed),
            prefix,
            frozenset(checked),
        )
        shape = self._shapes.get(key)
        if shape is not None and leaves_valid(leaves):
            self._shapes.move_to_end(key)
            params = {name: _value(part, leaves) for name, part in shape.parts}
            return CompiledFilter(shape.where, shape.sql, params, dict(shape.lists))
        fresh = self._fresh(table, filter, dialect, keyed, prefix, checked)
        if shape is None:
            learned = self._learn(table, shape_of, leaves, fresh, dialect, keyed, prefix, checked)
            if learned is not None:
                self._shapes[key] = learned
                while len(self._shapes) > self.size:
                    self._shapes.popitem(last=False)
        return fresh

    @staticmethod
    def _fresh(
        table: Table,
        filter: Any,
        dialect: Dialect,
        keyed: AbstractSet[str],
        prefix: str,
        checked: AbstractSet[str],
    ) -> CompiledFilter:
        lists: dict[str, int] = {}
        where = compile_filter(
            table.c.cmetadata,
            filter,
            keyed,
            prefix,
            checked=checked,
            checked_column=unindexed(table.c.cmetadata) if checked else None,
            lists=lists,
        )
        sql = str(where.compile(dialect=dialect))
        return CompiledFilter(where, sql, filter_params(where), lists)

    def _learn(
        self,
        table: Table,
        shape_of: Hashable,
        leaves: list[Leaf],
        fresh: CompiledFilter,
        dialect: Dialect,
        keyed: AbstractSet[str],
        prefix: str,
        checked: AbstractSet[str],
    ) -> _Shape | None:
        """The skeleton's shape, from a probe; None when the probe does not compile as
        ``fresh`` did, or a value read off it would not be ``fresh``'s."""
        probe_filter = probe(shape_of)
        try:
            probed = self._fresh(table, probe_filter, dialect, keyed, prefix, checked)
        except (ConfigurationError, ValueError):  # refused: this skeleton is never kept
            return None
        if probed.sql != fresh.sql or probed.lists != fresh.lists:
            return None
        try:
            marks = _marks(len(leaves), probe_filter)
            parts = tuple((name, _part(value, marks)) for name, value in probed.params.items())
        except _Unread:
            return None
        if {name: _value(part, leaves) for name, part in parts} != fresh.params:
            return None
        return _Shape(fresh.where, fresh.sql, dict(fresh.lists), parts)


class _Unread(Exception):
    pass


def _marks(count: int, probe_filter: Any) -> dict[Any, _Part]:
    """Each value of ``probe_filter`` (a probe of ``count`` leaves), and its JSON text,
    as parts."""
    marks: dict[Any, _Part] = {}
    filled = skeleton(probe_filter)
    if filled is None or len(filled[1]) != count:
        raise _Unread
    for i, leaf in enumerate(filled[1]):
        marks[(type(leaf), leaf)] = ("leaf", i)
        marks[(str, json.dumps(leaf))] = ("json", i)
    return marks


def _part(value: Any, marks: dict[Any, _Part]) -> _Part:
    """``value`` (a probe's parameter) in terms of the leaves.

    Raises:
        _Unread: a number that is no probe value, or a string holding :data:`MARK` that
            is neither a probe value nor its JSON text (part of one, transformed).
    """
    kind = type(value)
    if value is None or kind is bool:
        return ("const", value)
    if kind is str or kind is int or kind is float:
        found = marks.get((kind, value))
        if found is not None:
            return found
        if kind is not str or MARK in value:
            raise _Unread
        return ("const", value)
    if kind is list:
        return ("list", tuple(_part(v, marks) for v in value))
    if kind is dict:
        if any(type(k) is not str or MARK in k for k in value):
            raise _Unread
        return ("dict", tuple((k, _part(v, marks)) for k, v in value.items()))
    raise _Unread


def _value(part: _Part, leaves: list[Leaf]) -> Any:
    tag, arg = part
    if tag == "leaf":
        return leaves[arg]
    if tag == "const":
        return arg
    if tag == "json":
        return json.dumps(leaves[arg])
    if tag == "list":
        return [_value(p, leaves) for p in arg]
    return {k: _value(p, leaves) for k, p in arg}
