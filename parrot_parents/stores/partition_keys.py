"""A partition key's values, as every store reads them (no backend's code).

A partition key is a metadata key whose values each get indexes (PostgreSQL:
:mod:`~parrot_parents.stores.postgres.collections.partitions`) or a partition (Milvus's
partition key) of their own; a search whose filter fixes the key to one value reads only
that value's. Values that are strings, integers (64 bits) or booleans qualify; JSON text
tells ``"1"``, ``1`` and ``true`` apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.records.markers import HIERARCHY_KEYS

#: Keys the hierarchy writes on every row, whatever the caller gives: no partition key.
_WRITTEN_BY_HIERARCHY = HIERARCHY_KEYS | {"document_id", "retrieval_preamble"}

__all__ = [
    "PartitionValue",
    "canonical",
    "fixed_value",
    "fixed_values",
    "is_partition_value",
    "keep_value",
    "only_key",
    "same_value",
    "validate_partition_key",
    "value_json",
]

#: A value that gets indexes (or a partition) of its own.
PartitionValue = str | int | bool
_MAX_KEY_CHARS = 256


def validate_partition_key(key: object) -> str | None:
    """``key`` checked: None, or a metadata key of 1 to 256 characters that does not start
    with ``$``, holds no NUL and no lone surrogate (neither can reach PostgreSQL), and is
    not a key the hierarchy writes (``is_chunk``, ``document_id``...: the loaders set
    those, so a value given for them would be lost).

    Raises:
        ConfigurationError: anything else.
    """
    if key is None:
        return None
    if (
        not isinstance(key, str)
        or not 1 <= len(key) <= _MAX_KEY_CHARS
        or key.startswith("$")
        or "\x00" in key
        or any("\ud800" <= c <= "\udfff" for c in key)
    ):
        raise ConfigurationError(
            f"partition_key must be a metadata key of 1 to {_MAX_KEY_CHARS} characters, not "
            f"starting with '$', with no NUL and no lone surrogate; got {key!r}"
        )
    if key in _WRITTEN_BY_HIERARCHY:
        raise ConfigurationError(
            f"partition_key {key!r} is a key the hierarchy writes on every row",
            hint="partition by a key of your own, such as tenant",
        )
    return key


def is_partition_value(value: object) -> bool:
    """Whether ``value`` gets indexes of its own: a string, a boolean or a 64-bit integer."""
    return isinstance(value, str | int | bool) and not (
        isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63
    )


def value_json(value: PartitionValue) -> str:
    """The value as compact JSON text (``"acme"`` -> ``'"acme"'``, ``1`` -> ``'1'``)."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def canonical(key: str, value: PartitionValue) -> str:
    """``{key: value}`` as canonical JSON text (sorted keys, no spaces)."""
    return json.dumps({key: value}, sort_keys=True, separators=(",", ":"))


def fixed_value(filter: Mapping[str, Any] | None, key: str) -> PartitionValue | None:
    """The one value of ``key`` that every row matching ``filter`` has, when the filter
    says so at its top level (a plain value, ``{"$eq": v}``, or either inside a top-level
    ``$and``); else None."""
    if not filter:
        return None
    found: list[Any] = []
    if key in filter:
        value = filter[key]
        if isinstance(value, Mapping):
            if set(value) == {"$eq"}:
                found.append(value["$eq"])
        else:
            found.append(value)
    items = filter.get("$and")
    if isinstance(items, list):
        for item in items:
            if isinstance(item, Mapping):
                inner = fixed_value(item, key)
                if inner is not None:
                    found.append(inner)
    values: list[PartitionValue] = [v for v in found if is_partition_value(v)]
    if not values or any(canonical(key, v) != canonical(key, values[0]) for v in values):
        # Two different fixed values match nothing; the plain filter says so.
        return None
    return values[0]


def fixed_values(filter: Mapping[str, Any] | None, key: str) -> list[PartitionValue] | None:
    """The values of ``key`` one of which every row matching ``filter`` has, when the
    filter says so at its top level (what :func:`fixed_value` reads, or ``{"$in":
    [...]}``, or any of them inside a top-level ``$and``: their common values), each
    once, in the order given; else None (also when a value listed is not a
    :data:`PartitionValue`, or none is common: the plain filter then says so)."""
    if not filter:
        return None
    sets: list[list[Any]] = []
    if key in filter:
        value = filter[key]
        if isinstance(value, Mapping):
            if set(value) == {"$eq"}:
                sets.append([value["$eq"]])
            elif set(value) == {"$in"} and isinstance(value["$in"], list):
                sets.append(list(value["$in"]))
        else:
            sets.append([value])
    items = filter.get("$and")
    if isinstance(items, list):
        for item in items:
            if isinstance(item, Mapping):
                inner = fixed_values(item, key)
                if inner is not None:
                    sets.append(list(inner))
    if not sets or any(not is_partition_value(v) for vs in sets for v in vs):
        return None
    # Told apart as JSON (``true`` is not ``1``) by their type, not by JSON text: an
    # ``$in`` of 500 values spent 1.2 ms in ``json.dumps``.
    common: dict[tuple[str, Any], PartitionValue] = {(type(v).__name__, v): v for v in sets[0]}
    for other in sets[1:]:
        names = {(type(v).__name__, v) for v in other}
        common = {c: v for c, v in common.items() if c in names}
    return list(common.values()) or None


def only_key(filter: Mapping[str, Any] | None, key: str) -> bool:
    """Whether ``filter`` reads ``key`` and nothing else at its top level (or inside a
    top-level ``$and`` of such filters)."""
    if not filter:
        return False
    if set(filter) == {key}:
        return True
    items = filter.get("$and")
    return (
        set(filter) == {"$and"}
        and isinstance(items, list)
        and bool(items)
        and all(isinstance(i, Mapping) and only_key(i, key) for i in items)
    )


def keep_value(
    key: str, document_id: str, stored: Mapping[str, Any], given: Mapping[str, Any]
) -> None:
    """Refuse to write document ``document_id``, whose stored metadata is ``stored``, with
    metadata ``given`` that holds another value of the partition key ``key``, or none
    (told apart as JSON: ``true`` is not ``1``). A write that keeps the value passes, and
    so does any write when ``stored`` holds none (a document may be given a value). Two
    tenants' files of one name would otherwise replace each other unnoticed.

    Raises:
        ConfigurationError: the value would change (the hint says how to move or keep both).
    """
    if key not in stored or same_value(key, stored, given):
        return
    # "no value" for an absent key, so that it reads apart from a value None (JSON null).
    to = f"{key} {given[key]!r}" if key in given else f"no value of {key}"
    raise ConfigurationError(
        f"document {document_id!r} is stored under {key} {stored[key]!r}; this write gives "
        f"it {to} (not written)",
        hint="to move it, delete it first; to keep both, give each value's documents ids of "
        "their own: id_prefix= (CLI: ingest --id-prefix), or a document_id per Document in "
        "Python",
    )


def same_value(key: str, a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether metadata ``a`` and ``b`` hold the same value of ``key``, or both none
    (compared as JSON: ``true`` is not ``1``)."""
    if (key in a) != (key in b):
        return False
    return json.dumps(a.get(key), sort_keys=True) == json.dumps(b.get(key), sort_keys=True)
