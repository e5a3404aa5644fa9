"""A bot's scope: a metadata filter every search of the bot holds to, which a call's own
filter can narrow but never widen or remove.

The scope is written in the filter language of :mod:`parrot_parents.stores.filters`. A
search runs with both (:func:`scoped_filter`; the scope alone without a call filter), so
every child it returns is in the scope; expansion reads through
:class:`~parrot_parents.stores.parents.scoped.ScopedParentSearcher`, so no parent, window
or merge brings in a row outside it; packing only cuts what expansion returned.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.filters import validate_filter

__all__ = ["scoped_filter", "validate_scope"]


def validate_scope(scope: Any) -> dict[str, Any] | None:
    """``scope`` checked as a filter and copied (so a caller's later change of its dict
    cannot widen it); None for None (no scope).

    Raises:
        ConfigurationError: not a dict, a bad filter (the message names the key),
            an ``$or`` with an empty clause, or ``{}``: an empty filter keeps every row,
            so an empty scope would widen a bot to its whole collection; removing a
            scope is said with None (``--scope none``, ``scope=none``, JSON null), never
            by an empty one.
    """
    if scope is None:
        return None
    if not isinstance(scope, Mapping):
        raise ConfigurationError(
            f"scope must be a filter (a JSON object), got {type(scope).__name__}",
            hint='e.g. {"tenant": "acme"}',
        )
    if not scope:
        raise ConfigurationError(
            "scope: an empty scope would let the bot search its whole collection; to "
            "remove the scope, say so: --scope none (scope=none, or null in JSON)"
        )
    try:
        validate_filter(dict(scope))
    except ConfigurationError as exc:
        raise ConfigurationError(f"scope: {exc.message}", hint=exc.hint) from exc
    if _has_empty_alternative(scope):
        raise ConfigurationError(
            "scope: an $or with an empty clause keeps every row, so the scope would let "
            "the bot search its whole collection",
            hint="remove the empty clause; to remove the scope, say so: --scope none",
        )
    return copy.deepcopy(dict(scope))


def _has_empty_alternative(node: Any) -> bool:
    """Whether an ``$or`` anywhere in ``node`` has an empty clause (``{}`` keeps every
    row, and so does any ``$or`` holding it)."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            if key == "$or" and isinstance(value, list) and any(c == {} for c in value):
                return True
            if _has_empty_alternative(value):
                return True
    elif isinstance(node, list):
        return any(_has_empty_alternative(item) for item in node)
    return False


def scoped_filter(
    scope: Mapping[str, Any] | None, filter: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """The filter a search runs with: the call's ``filter`` within ``scope``.

    Returns:
        ``filter`` without a scope, the scope without a filter (or with ``{}``); the two
        merged into one dict when they share no key (a filter's keys all hold, and a store
        whose filter language has no ``$and``, Milvus, takes it), else
        ``{"$and": [scope, filter]}``.
    """
    if not scope:
        return None if filter is None else dict(filter)
    held = copy.deepcopy(dict(scope))
    if not filter:
        return held
    if held.keys().isdisjoint(filter):
        return {**held, **filter}
    return {"$and": [held, dict(filter)]}
