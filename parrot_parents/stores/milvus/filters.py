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

On a collection with a partition key, :func:`partition_clause` names the one partition a
filter's rows can lie in, and :func:`partition_text` what each child keeps there.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.milvus.schema import MAX_PARTITION_BYTES, PARTITION_FIELD
from parrot_parents.stores.partition_keys import fixed_value, is_partition_value, value_json

__all__ = [
    "KEY_PATTERN",
    "document_filter",
    "in_list",
    "literal",
    "partition_clause",
    "partition_text",
    "translate_filter",
]

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


def partition_text(value: object) -> str:
    """What a child whose partition key holds ``value`` keeps in
    :data:`~parrot_parents.stores.milvus.schema.PARTITION_FIELD`: the value's JSON text
    (``"1"`` -> ``'"1"'``, ``1`` -> ``'1'``), or ``""`` for a value that gets no partition
    of its own (a missing key, null, a list or object, a fractional number, an integer
    beyond 64 bits, JSON text over ``MAX_PARTITION_BYTES``).

    Milvus compares JSON numbers and booleans by value (``1 == 1.0 == true``, ``0 ==
    false``), so booleans and whole floats take their integer's text: every row a filter
    ``{key: v}`` matches then lies in the one partition :func:`partition_clause` names.
    """
    if isinstance(value, bool) or (isinstance(value, float) and value.is_integer()):
        value = int(value)
    if not isinstance(value, str | int) or not is_partition_value(value):
        return ""
    text = value_json(value)  # ASCII only: its length is its size in bytes
    return text if len(text) <= MAX_PARTITION_BYTES else ""


def partition_clause(filter: Mapping[str, Any] | None, key: str | None) -> str:
    """``partition_value == "<text>"`` when ``filter`` fixes the partition key ``key`` to
    one value (:func:`~parrot_parents.stores.partition_keys.fixed_value`: a plain value or
    ``{"$eq": v}``) that has a partition (:func:`partition_text`); ``""`` otherwise,
    including when ``key`` is None (a collection without a partition key). ANDed with the
    filter's own expression it changes no answer: Milvus then searches one partition."""
    if key is None:
        return ""
    value = fixed_value(filter, key)
    text = "" if value is None else partition_text(value)
    return f"{PARTITION_FIELD} == {literal(text)}" if text else ""


def document_filter(document_id: str, keep: Sequence[str] = ()) -> str:
    """The rows of ``document_id``, less those whose id is in ``keep``."""
    expr = f"document_id == {literal(str(document_id))}"
    if keep:
        expr += " and " + in_list("id", keep).replace(" in [", " not in [", 1)
    return expr
