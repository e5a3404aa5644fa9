"""A metadata filter's structure without its values: what its compiled SQL depends on.

:func:`~parrot_parents.stores.filters.compile_filter` binds every string and number of a
filter as a parameter, named by the filter's structure, so two filters whose structure
and value types agree compile to one SQL text and differ only in their parameters' values.
The skeleton is that structure: the keys and operators in order, the lengths of lists,
``true``/``false``/``null`` as they are (they decide the SQL), and each string, integer
or float replaced by its type's name. Its leaves are the values it leaves out, in the
order a depth-first walk meets them.

Only plain JSON values (``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``,
``None``, exactly those types) have a skeleton: anything else is compiled every time, so
that it meets the compiler's own checks and messages. Keys holding :data:`MARK` have none
either, as :func:`probe` writes it into strings.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Any

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.records.values import check_string

__all__ = ["MARK", "Leaf", "leaves_valid", "probe", "skeleton"]

#: A private-use character that opens and closes the strings :func:`probe` writes.
MARK = "\ue000"

#: A value a skeleton leaves out.
Leaf = str | int | float

#: Integers in 64 bits, as the compiler takes them.
_INT_LIMIT = 2**63
#: Deeper than the compiler's limit of 16 levels; a deeper filter is compiled, and refused.
_MAX_DEPTH = 40
#: The probe's numbers: distinct from each other, integers from floats, inside 64 bits.
_INT_PROBE = 2**62
_FLOAT_PROBE = 2.0**50


class _NoSkeleton(Exception):
    pass


def skeleton(filter: Any) -> tuple[Hashable, list[Leaf]] | None:
    """``filter``'s skeleton (hashable; equal for filters that compile to one SQL text
    under the same settings) and its leaves, in the order of a depth-first walk; None
    when it holds anything but plain JSON values, a key that is not a string, a key
    holding :data:`MARK`, or more than 40 levels."""
    leaves: list[Leaf] = []
    try:
        return _walk(filter, leaves, 0), leaves
    except _NoSkeleton:
        return None


def _walk(value: Any, leaves: list[Leaf], depth: int) -> Hashable:
    kind = type(value)
    if value is None:
        return None
    if kind is bool:
        return bool(value)
    if kind is str or kind is int or kind is float:
        leaves.append(value)
        return kind.__name__
    if depth > _MAX_DEPTH:
        raise _NoSkeleton
    if kind is dict:
        items = []
        for key, item in value.items():
            if type(key) is not str or MARK in key:
                raise _NoSkeleton
            items.append((key, _walk(item, leaves, depth + 1)))
        return ("{", tuple(items))
    if kind is list:
        return ("[", tuple(_walk(item, leaves, depth + 1) for item in value))
    raise _NoSkeleton


def probe(shape: Hashable) -> Any:
    """A filter of skeleton ``shape`` whose ``i``-th leaf is a value of the leaf's type
    found nowhere else in it: ``MARK i MARK`` for a string, ``2**62 + i`` for an integer,
    ``2**50 + i + 0.5`` for a float. Compiled, each parameter's value shows which leaves
    it is made of."""
    position = iter(range(1 << 62))
    return _filled(shape, position)


def _filled(shape: Any, position: Any) -> Any:
    if shape is None or isinstance(shape, bool):
        return shape
    if shape == "str":
        return f"{MARK}{next(position)}{MARK}"
    if shape == "int":
        return _INT_PROBE + next(position)
    if shape == "float":
        return _FLOAT_PROBE + next(position) + 0.5
    tag, items = shape
    if tag == "{":
        return {key: _filled(item, position) for key, item in items}
    return [_filled(item, position) for item in items]


def leaves_valid(leaves: list[Leaf]) -> bool:
    """Whether every leaf passes the compiler's checks of a value wherever it stands: an
    integer in 64 bits, a finite float, a string without NUL or lone surrogate and not
    ending with ``\\`` (a ``$like`` pattern's lone escape; refused here wherever it
    stands, so that such a filter is compiled and judged by the compiler)."""
    for leaf in leaves:
        # Leaves are exactly str, int or float (:func:`skeleton` keeps booleans).
        if isinstance(leaf, int):
            if not -_INT_LIMIT <= leaf < _INT_LIMIT:
                return False
        elif isinstance(leaf, float):
            if not math.isfinite(leaf):
                return False
        else:
            if leaf.endswith("\\"):
                return False
            try:
                check_string(leaf, "")
            except ConfigurationError:
                return False
    return True
