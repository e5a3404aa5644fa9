"""Metadata filters translated to Milvus boolean expressions.

A filter is a dict over metadata keys, the same shape as the PostgreSQL store's:

* ``{"source": "handbook.md"}``: plain equality (several keys are ANDed);
* ``{"year": {"$gte": 2020, "$lt": 2024}}``: operators ``$eq $ne $lt $lte $gt $gte``
  (a scalar) and ``$in $nin`` (a non-empty list of scalars); several operators on one key
  are ANDed.

Keys read the ``metadata`` JSON field (``metadata["source"]``). Milvus Lite 3.2 accepts no
bound parameters (filter templating) and no ``in`` on a JSON path, so values are written
as literals by :func:`literal`, which escapes ``\\`` and ``"`` and refuses control
characters, and ``$in``/``$nin`` become ORed equalities / ANDed inequalities. Keys are
checked against :data:`KEY_PATTERN`, because they are part of the expression text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from parrot_parents.errors import ConfigurationError

__all__ = ["KEY_PATTERN", "in_list", "literal", "translate_filter"]

#: Metadata keys a filter may name (letters, digits, ``_``, ``-``, ``.``; at most 64).
KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")

_COMPARISONS = {"$eq": "==", "$ne": "!=", "$lt": "<", "$lte": "<=", "$gt": ">", "$gte": ">="}
#: Each membership operator as the joiner of its equalities or inequalities.
_MEMBERSHIP = {"$in": ("==", " or "), "$nin": ("!=", " and ")}
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def literal(value: Any) -> str:
    """``value`` as a Milvus expression literal.

    Strings are double-quoted with ``\\`` and ``"`` escaped; booleans are ``true`` /
    ``false``; numbers are written in Python's notation.

    Raises:
        ConfigurationError: a control character in a string, a non-finite number, or a
            value that is not a string, number or boolean.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigurationError(f"filter value {value!r} is not a finite number")
        return repr(value)
    if isinstance(value, str):
        if _CONTROL.search(value):
            raise ConfigurationError(f"filter value {value!r} contains a control character")
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise ConfigurationError(
        f"filter values must be strings, numbers or booleans, got {type(value).__name__}"
    )


def in_list(field: str, values: Iterable[Any]) -> str:
    """``field in [v1, v2, ...]`` for a scalar field (not a JSON path: Milvus Lite 3.2
    refuses ``in`` there)."""
    return f"{field} in [" + ", ".join(literal(v) for v in values) + "]"


def translate_filter(filter: Mapping[str, Any] | None) -> str:
    """The Milvus expression of a metadata filter; ``""`` for no filter.

    Raises:
        ConfigurationError: not a dict, a bad key, an unknown operator (anything but
            ``$eq $ne $lt $lte $gt $gte $in $nin``: ``$and``, ``$or``, ``$like``, ... are
            not supported on Milvus), a bad value, or an empty ``$in``/``$nin`` list.
    """
    if filter is None:
        return ""
    if not isinstance(filter, Mapping):
        raise ConfigurationError(f"filter must be a dict, got {type(filter).__name__}")
    clauses: list[str] = []
    for key, condition in filter.items():
        if not isinstance(key, str) or not KEY_PATTERN.match(key):
            raise ConfigurationError(
                f"filter key {key!r} is not supported on Milvus",
                hint="use metadata keys of letters, digits, '_', '-' or '.' (at most 64)",
            )
        ref = f'metadata["{key}"]'
        if not isinstance(condition, Mapping):
            clauses.append(f"{ref} == {literal(condition)}")
            continue
        if not condition:
            raise ConfigurationError(f"filter {key!r}: empty operator dict")
        for op, value in condition.items():
            if op in _COMPARISONS:
                clauses.append(f"{ref} {_COMPARISONS[op]} {literal(value)}")
            elif op in _MEMBERSHIP:
                if not isinstance(value, list | tuple) or not value:
                    raise ConfigurationError(f"filter {key!r}: {op} needs a non-empty list")
                sign, joiner = _MEMBERSHIP[op]
                clauses.append("(" + joiner.join(f"{ref} {sign} {literal(v)}" for v in value) + ")")
            else:
                known = " ".join([*_COMPARISONS, *_MEMBERSHIP])
                raise ConfigurationError(
                    f"filter {key!r}: operator {op!r} is not supported on Milvus (known: {known})"
                )
    return " and ".join(f"({c})" for c in clauses)
