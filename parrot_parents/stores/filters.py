"""Metadata filters: the langchain-postgres filter language, compiled to parameterised SQL
over the jsonb ``cmetadata`` column.

A filter is a dict of metadata keys and ``$and``/``$or``/``$not``. Plain values are JSON
containment (``cmetadata @> ...``, served by the GIN index; so are ``$eq``/``$in``); an
object under a key holds operators only (``$eq $ne $lt $lte $gt $gte $in $nin $between
$exists $like $ilike``), all of which must hold (README, "How it stores the hierarchy").

* ``$ne``/``$nin``/``$not`` follow MongoDB and langchain: a row without the key matches.
* Ordering compares numbers as numbers and strings as text; a row whose value has the
  other type, or lacks the key, does not match. Booleans and ``null`` take only
  ``$eq``/``$ne``/``$in``/``$nin``.
* Values are bound under names fixed by the filter's structure (``filter_0``...), so a
  statement holding a filter is prepared once per structure (:func:`filter_params`).

Limits (a :class:`~parrot_parents.errors.ConfigurationError` names the key): keys of 1 to
256 characters; no NUL or lone surrogate in strings; no ``$like`` pattern ending with a
lone ``\\``; finite numbers (no NaN, Infinity, ``1e400``), integers in 64 bits; at most
1000 values per list; nesting at most 16 levels deep.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Hashable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from sqlalchemy import (
    TEXT,
    ColumnElement,
    String,
    and_,
    any_,
    bindparam,
    cast,
    false,
    func,
    not_,
    or_,
    true,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.sql import column, visitors
from sqlalchemy.sql.elements import BindParameter

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.filter_skeleton import leaves_valid, skeleton
from parrot_parents.stores.records.values import check_string

__all__ = [
    "COMPARISON_OPERATORS",
    "FILTER_PARAM_PREFIX",
    "LOGICAL_OPERATORS",
    "SCOPE_PARAM_PREFIX",
    "UNESTIMATED_OPERATORS",
    "compile_filter",
    "estimated_part",
    "filter_params",
    "has_unestimated",
    "named_keys",
    "validate_filter",
]

#: The names of a compiled filter's parameters: this prefix and their position.
FILTER_PARAM_PREFIX = "filter_"
#: The prefix of a bot's scope compiled beside a search's own filter (every row a search
#: reads for expansion judged against it in the same statement), so the two never share
#: a parameter name.
SCOPE_PARAM_PREFIX = "scope_"

COMPARISON_OPERATORS = frozenset(
    {"$eq", "$ne", "$lt", "$lte", "$gt", "$gte", "$in", "$nin", "$between", "$exists"}
    | {"$like", "$ilike"}
)
LOGICAL_OPERATORS = frozenset({"$and", "$or", "$not"})

_MAX_DEPTH = 16
_MAX_LIST = 1000
_MAX_KEY = 256
_INT_LIMIT = 2**63
_ORDER = {"$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">="}
#: Operators compiled to a condition on an expression over the ``jsonb`` column (a key's
#: value, typed or as text), for which PostgreSQL keeps no statistics: the planner takes
#: such a condition to keep a fixed share of the rows.
UNESTIMATED_OPERATORS = frozenset({*_ORDER, "$between", "$like", "$ilike"})


#: The operators a filter key's statistics estimate (``$like`` reads the value as text,
#: which they do not describe).
_KEYED_ESTIMATES = frozenset({*_ORDER, "$between"})


def has_unestimated(filter: Mapping[str, Any], keyed: AbstractSet[str] = frozenset()) -> bool:
    """Whether a valid ``filter`` holds a condition the planner cannot estimate
    (:data:`UNESTIMATED_OPERATORS`), at any depth of ``$and``/``$or``/``$not``. An
    ordering on one of the ``keyed`` keys (the collection's filter keys, which have
    statistics: :mod:`~parrot_parents.stores.postgres.collections.filter_keys`) is
    estimated."""
    for key, value in filter.items():
        if key in LOGICAL_OPERATORS:
            items = value if isinstance(value, list) else [value]
            if any(isinstance(i, Mapping) and has_unestimated(i, keyed) for i in items):
                return True
        elif isinstance(value, Mapping):
            unestimated = UNESTIMATED_OPERATORS.intersection(value)
            if key in keyed:
                unestimated -= _KEYED_ESTIMATES
            if unestimated:
                return True
    return False


def named_keys(filter: Mapping[str, Any]) -> set[str]:
    """The metadata keys a valid ``filter`` puts a condition on, at any depth of
    ``$and``/``$or``/``$not``."""
    keys: set[str] = set()
    for key, value in filter.items():
        if key in LOGICAL_OPERATORS:
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, Mapping):
                    keys |= named_keys(item)
        else:
            keys.add(key)
    return keys


def estimated_part(
    filter: Mapping[str, Any], keyed: AbstractSet[str] = frozenset()
) -> dict[str, Any]:
    """The conditions of a valid ``filter`` that it ANDs at its top level and that hold no
    condition the planner cannot estimate (:func:`has_unestimated`); ``{}`` when none.
    Every row ``filter`` keeps, this part keeps: its estimate bounds the filter's."""
    part: dict[str, Any] = {}
    for key, value in filter.items():
        if key == "$and" and isinstance(value, list):
            items = [i for i in value if isinstance(i, Mapping) and not has_unestimated(i, keyed)]
            if items:
                part[key] = items
        elif not has_unestimated({key: value}, keyed):
            part[key] = value
    return part


def validate_filter(filter: Any) -> None:
    """Check ``filter`` without a table (e.g. at the HTTP boundary).

    Raises:
        ConfigurationError: see :func:`compile_filter`.
    """
    # A call checks its filter at each layer it crosses, with new values each time: a
    # skeleton found valid once (:mod:`~parrot_parents.stores.filter_skeleton`) is valid
    # with any leaves that pass the value checks, which are all that depend on them.
    found = skeleton(filter)
    if found is not None and found[0] in _VALID and leaves_valid(found[1]):
        return
    # Compiled as if every key were a filter key: the same checks, and an ``$in`` of
    # hundreds of values built as one condition rather than one per value.
    compile_filter(column("cmetadata", JSONB), filter, _EVERY_KEY)
    if found is not None:
        if len(_VALID) >= _VALID_KEPT:
            _VALID.clear()
        _VALID[found[0]] = None


#: Skeletons of filters found valid (at most :data:`_VALID_KEPT`).
_VALID: dict[Hashable, None] = {}
_VALID_KEPT = 512


class _EveryKey(frozenset[str]):
    """A set holding every key (:func:`validate_filter`'s ``keyed``)."""

    def __contains__(self, key: object) -> bool:
        return True


_EVERY_KEY = _EveryKey()


def compile_filter(
    cmetadata: Any,
    filter: Any,
    keyed: AbstractSet[str] = frozenset(),
    prefix: str = FILTER_PARAM_PREFIX,
    *,
    checked: AbstractSet[str] = frozenset(),
    checked_column: Any = None,
    lists: dict[str, int] | None = None,
) -> ColumnElement[bool]:
    """The SQL condition of ``filter`` over the jsonb column ``cmetadata``.

    Args:
        cmetadata: the ``cmetadata`` column (JSONB) of the collection table.
        filter: a filter dict (module docstring); ``{}`` matches every row.
        keyed: the collection's filter keys
            (:mod:`~parrot_parents.stores.postgres.collections.filter_keys`): an equality
            or ``$in`` on one with scalar values is compiled to a condition on the key's
            value (``cmetadata['key'] = v``, ``= ANY(...)``, ``$nin`` as ``(... = ANY(...))
            IS NOT TRUE``), which its B-tree index and statistics serve, instead of
            containment (the GIN index, and a selectivity guessed per value: planning an
            ``$in`` of 500 values took 13 ms). The rows kept are the same: containment of
            a scalar under a key is equality of the key's value.

        prefix: the parameters' name prefix (default :data:`FILTER_PARAM_PREFIX`;
            :data:`SCOPE_PARAM_PREFIX` for a scope judged beside a filter).
        checked: keys whose conditions are compiled over ``checked_column`` instead (the
            same object, as an expression no index serves), so that they are checked on
            the rows the other conditions' indexes yield; the rows kept and the
            parameters (names and values) are those of the plain compilation. A
            containment of several plain values goes over it only when all its keys are
            ``checked``.
        checked_column: that expression; required with ``checked``.
        lists: filled, when given, with the parameter name and length of each ``$in`` on
            a ``keyed`` key that the filter ANDs at its top level (its own keys, and those
            of a top-level ``$and``): a row is kept only if its value is in one of them.

    Returns:
        A boolean SQLAlchemy expression with every value bound as a parameter named
        ``<prefix><i>``, ``i`` counting the values in the order the filter's structure
        binds them (see the module docstring; :func:`filter_params` reads them back).

    Raises:
        ConfigurationError: not a dict, an unknown operator (named), a value of the wrong
            type or out of the limits (the key is named).
        ValueError: ``checked`` without ``checked_column``.
    """
    if not isinstance(filter, Mapping):
        raise ConfigurationError(f"filter must be a dict, got {type(filter).__name__}")
    if checked and checked_column is None:
        raise ValueError("compile_filter: checked keys need a checked_column")
    compiler = _Compiler(cmetadata, keyed, prefix, checked, checked_column)
    where = compiler.where(filter, 0, conjoined=True)
    if lists is not None:
        lists.update(compiler.lists)
    return where


def filter_params(where: ColumnElement[bool]) -> dict[str, Any]:
    """The values of a condition from :func:`compile_filter`, by parameter name."""
    return {
        element.key: element.value
        for element in visitors.iterate(where)
        if isinstance(element, BindParameter)
    }


class _Compiler:
    def __init__(
        self,
        col: Any,
        keyed: AbstractSet[str],
        prefix: str,
        checked: AbstractSet[str] = frozenset(),
        checked_col: Any = None,
    ) -> None:
        self.base = col
        self.keyed = keyed
        self.prefix = prefix
        self.position = itertools.count()
        self.checked = checked
        self.checked_col = checked_col
        #: ``lists`` of :func:`compile_filter`.
        self.lists: dict[str, int] = {}

    def bind(self, value: Any, type_: Any) -> BindParameter[Any]:
        """``value`` as the next parameter, named by its position (``<prefix><i>``): the
        filter's structure fixes the order in which its values are bound."""
        return bindparam(f"{self.prefix}{next(self.position)}", value, type_=type_)

    def column(self, *keys: str) -> Any:
        """The column that conditions on ``keys`` read: the checked one when each is
        checked."""
        return self.checked_col if keys and all(k in self.checked for k in keys) else self.base

    def value_is(self, key: str, value: Any) -> ColumnElement[bool]:
        """``cmetadata[key] = value``: a filter key's scalar equality."""
        cond: ColumnElement[bool] = self.column(key)[self.bind(key, String())] == self.bind(
            value, JSONB
        )
        return cond

    def value_in(self, key: str, values: list[Any], listed: bool = False) -> ColumnElement[bool]:
        """``cmetadata[key] = ANY(values)``: a filter key's ``$in`` of scalars; ``listed``:
        recorded in :attr:`lists`."""
        element = self.column(key)[self.bind(key, String())]
        array = self.bind([json.dumps(v) for v in values], ARRAY(TEXT))
        if listed:
            self.lists[array.key] = len(values)
        cond: ColumnElement[bool] = element == any_(cast(array, ARRAY(JSONB)))
        return cond

    def contains(self, values: dict[str, Any]) -> ColumnElement[bool]:
        """``cmetadata @> values``."""
        cond: ColumnElement[bool] = self.column(*values).contains(self.bind(values, JSONB))
        return cond

    def where(
        self, f: Mapping[str, Any], depth: int, conjoined: bool = False
    ) -> ColumnElement[bool]:
        if depth > _MAX_DEPTH:
            raise ConfigurationError(f"filter is nested more than {_MAX_DEPTH} levels deep")
        plain: dict[str, Any] = {}
        conds: list[ColumnElement[bool]] = []
        for key, value in f.items():
            _check_key(key)
            if key.startswith("$"):
                conds.append(self.logical(key, value, depth, conjoined))
            elif isinstance(value, Mapping):
                _check_operators(key, value)
                conds.extend(self.field(key, op, arg, conjoined) for op, arg in value.items())
            else:
                _check_value(key, value, nested=True)
                if key in self.keyed and _scalar(value):
                    conds.append(self.value_is(key, value))
                else:
                    plain[key] = value
        if plain:
            conds.insert(0, self.contains(plain))
        if not conds:
            return true()
        return conds[0] if len(conds) == 1 else and_(*conds)

    def logical(self, op: str, value: Any, depth: int, conjoined: bool) -> ColumnElement[bool]:
        if op not in LOGICAL_OPERATORS:
            raise _unknown(op, "")
        if op == "$not":
            items = value if isinstance(value, list) else [value]
        elif isinstance(value, list):
            items = value
        else:
            raise ConfigurationError(f"filter {op} needs a list of filters")
        if not items or len(items) > _MAX_LIST:
            raise ConfigurationError(f"filter {op} needs 1 to {_MAX_LIST} filters")
        parts = []
        for item in items:
            if not isinstance(item, Mapping):
                raise ConfigurationError(
                    f"filter {op} needs filter dicts, got {type(item).__name__}"
                )
            parts.append(self.where(item, depth + 1, conjoined and op == "$and"))
        if op == "$or":
            return or_(*parts)
        joined = and_(*parts) if len(parts) > 1 else parts[0]
        if op != "$not":
            return joined
        # An ordering or a pattern on a key the row lacks is NULL, not false, and NOT NULL
        # is NULL: ``IS NOT TRUE`` lets such a row match the negation, as it matches $ne.
        return joined.is_not(true())

    def field(self, key: str, op: Any, arg: Any, conjoined: bool) -> ColumnElement[bool]:
        where = f"filter[{key!r}]"
        if not isinstance(op, str) or op not in COMPARISON_OPERATORS:
            raise _unknown(op, key)
        if op in ("$eq", "$ne"):
            _check_value(key, arg, nested=False)
            if op == "$eq" and key in self.keyed and _scalar(arg):
                return self.value_is(key, arg)
            cond: ColumnElement[bool] = self.contains({key: arg})
            return cond if op == "$eq" else not_(cond)
        if op in ("$in", "$nin"):
            if not isinstance(arg, list) or len(arg) > _MAX_LIST:
                raise ConfigurationError(f"{where} {op} needs a list of at most {_MAX_LIST} values")
            for v in arg:
                _check_value(key, v, nested=False)
            if not arg:
                return false() if op == "$in" else true()
            if key in self.keyed:
                # A row without the key is NULL here, and matches $nin (module docstring).
                found = self.value_in(key, arg, listed=conjoined and op == "$in")
                return found if op == "$in" else found.is_not(true())
            cond = or_(*[self.contains({key: v}) for v in arg])
            return cond if op == "$in" else not_(cond)
        if op == "$exists":
            if not isinstance(arg, bool):
                raise ConfigurationError(f"{where} $exists needs true or false")
            has: ColumnElement[bool] = self.column(key).has_key(self.bind(key, String()))
            return has if arg else not_(has)
        if op in ("$like", "$ilike"):
            if not isinstance(arg, str):
                raise ConfigurationError(f"{where} {op} needs a string pattern")
            _check_value(key, arg, nested=False)
            _check_pattern(where, op, arg)
            text: ColumnElement[str] = self.column(key)[self.bind(key, String())].astext
            pattern = self.bind(arg, text.type)
            return text.like(pattern) if op == "$like" else text.ilike(pattern)
        if op == "$between":
            if not isinstance(arg, list) or len(arg) != 2:
                raise ConfigurationError(f"{where} $between needs [low, high]")
            lo, hi = arg
            if _kind(key, lo) != _kind(key, hi):
                raise ConfigurationError(f"{where} $between needs two numbers or two strings")
            return and_(self.order(key, ">=", lo), self.order(key, "<=", hi))
        return self.order(key, _ORDER[op], arg)

    def order(self, key: str, sql_op: str, value: Any) -> ColumnElement[bool]:
        kind = _kind(key, value)
        element = self.column(key)[self.bind(key, String())]
        typed = func.jsonb_typeof(element) == self.bind(kind, String())
        # jsonb compares numbers numerically and strings by collation; the type guard keeps
        # jsonb's cross-type ordering (string < number < boolean) out of the answer.
        return and_(typed, element.op(sql_op)(self.bind(value, JSONB)))


def _scalar(value: Any) -> bool:
    """A value a filter key's equality compares (``null`` stays a containment: a bound
    ``None`` reaches the driver as SQL NULL, which equals nothing)."""
    return isinstance(value, str | int | float | bool)


def _kind(key: str, value: Any) -> str:
    _check_value(key, value, nested=False)
    if value is None or isinstance(value, bool):
        raise ConfigurationError(
            f"filter[{key!r}]: ordering needs a number or a string, got {value!r}"
        )
    return "string" if isinstance(value, str) else "number"


def _check_operators(key: str, value: Mapping[Any, Any]) -> None:
    """An object under a metadata key is an operator object, as in langchain-postgres: a
    plain object (a forgotten ``$``, or ``{}``) would silently match no row."""
    plain = [k for k in value if not (isinstance(k, str) and k.startswith("$"))]
    if not value or plain:
        got = f"key {str(plain[0])[:40]!r}" if plain else "an empty object"
        raise ConfigurationError(
            f"filter[{key!r}]: an object value must hold operators such as "
            f"{{'$gte': 2022}}, got {got}",
            hint="a plain value (a string, number, boolean, null or list) matches by equality",
        )


def _unknown(op: Any, key: str) -> ConfigurationError:
    where = f" on key {key!r}" if key else ""
    known = ", ".join(sorted(COMPARISON_OPERATORS | LOGICAL_OPERATORS))
    return ConfigurationError(f"unknown filter operator {op!r}{where}", hint=f"known: {known}")


def _check_key(key: Any) -> None:
    if not isinstance(key, str) or not key or len(key) > _MAX_KEY:
        raise ConfigurationError(
            f"filter keys must be non-empty strings of at most {_MAX_KEY} characters, "
            f"got {str(key)[:40]!r}"
        )
    check_string(key, f"filter key {key!r}")


def _check_pattern(where: str, op: str, pattern: str) -> None:
    """A LIKE pattern whose last character is a lone escape (``\\``) is an error in
    PostgreSQL's LIKE; refused here, for ``$ilike`` too."""
    trailing = len(pattern) - len(pattern.rstrip("\\"))
    if trailing % 2:
        raise ConfigurationError(
            f"{where} {op}: the pattern ends with the escape character \\",
            hint="write \\\\ for a literal backslash",
        )


def _check_value(key: str, value: Any, *, nested: bool, depth: int = 0) -> None:
    """A JSON value that PostgreSQL's jsonb can hold; containers only when ``nested``."""
    where = f"filter[{key!r}]"
    if depth > _MAX_DEPTH:
        raise ConfigurationError(f"{where} is nested more than {_MAX_DEPTH} levels deep")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if not -_INT_LIMIT <= value < _INT_LIMIT:
            raise ConfigurationError(f"{where}: the integer does not fit in 64 bits")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(f"{where}: {value!r} is not a finite number")
        return
    if isinstance(value, str):
        check_string(value, where)
        return
    if nested and isinstance(value, list) and len(value) <= _MAX_LIST:
        for v in value:
            _check_value(key, v, nested=True, depth=depth + 1)
        return
    if nested and isinstance(value, Mapping):
        for k, v in value.items():
            _check_key(k)
            _check_value(key, v, nested=True, depth=depth + 1)
        return
    raise ConfigurationError(f"{where}: unsupported value of type {type(value).__name__}")
