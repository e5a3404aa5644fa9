"""Whether a bot's scope keeps any row of its collection, and if not, why.

A scope that keeps no row is a valid filter, so validation accepts it; the bot then finds
nothing and says nothing. A misspelt key (``tennant``), a value no row carries, or a value
of the wrong JSON type (the string ``"12"`` where ingest stored the number ``12``) all look
alike from the bot's side. :func:`scope_findings` tells them apart when a bot is written,
so every surface that writes one can say it out loud. It only reports: a bot may be made
before its collection is filled.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqlalchemy import TableClause, column, exists, func, literal, select, table
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from parrot_parents.stores.filters import LOGICAL_OPERATORS, compile_filter

__all__ = ["ScopeWarning", "scope_findings"]

#: How many of a key's values a finding shows.
_SHOWN_VALUES = 5
_JSON_TYPE_NAMES = {
    "string": "a string",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
    "object": "an object",
    "array": "a list",
}


class ScopeWarning(UserWarning):
    """A bot was saved with a scope that keeps no row of its collection."""


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _wanted(value: Any) -> list[Any] | None:
    """The values a scope's condition on one key asks for; None when it is no plain
    equality (an operator such as ``$gt`` has no single value to compare)."""
    if not isinstance(value, Mapping):
        return [value]
    if set(value) == {"$eq"}:
        return [value["$eq"]]
    if set(value) == {"$in"} and isinstance(value["$in"], list):
        return list(value["$in"])
    return None


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


async def _any(conn: AsyncConnection, rows: TableClause, condition: Any) -> bool:
    return bool(
        await conn.scalar(select(exists(select(literal(1)).select_from(rows).where(condition))))
    )


async def _key_finding(
    conn: AsyncConnection, rows: TableClause, collection: str, key: str, value: Any
) -> str | None:
    """Why ``{key: value}`` keeps no row, or None when it keeps some."""
    meta = rows.c.cmetadata
    if await _any(conn, rows, compile_filter(meta, {key: value})):
        return None
    if not await _any(conn, rows, meta.has_key(key)):
        return f"no row of collection {collection!r} carries the key {key!r}"
    wanted = _wanted(value)
    carried = (
        await conn.execute(
            select(meta[key], func.jsonb_typeof(meta[key]))
            .where(meta.has_key(key))
            .distinct()
            .limit(_SHOWN_VALUES + 1)
        )
    ).all()
    if wanted is not None:
        # The same text under another JSON type: e.g. ingest stored 12, the scope says "12".
        for want in wanted:
            text = want if isinstance(want, str) else _shown(want)
            other = (
                await conn.execute(
                    select(meta[key], func.jsonb_typeof(meta[key]))
                    .where(
                        meta[key].astext == text, func.jsonb_typeof(meta[key]) != _json_type(want)
                    )
                    .limit(1)
                )
            ).first()
            if other is not None:
                return (
                    f"no row of collection {collection!r} carries {key} = {_shown(want)} "
                    f"({_JSON_TYPE_NAMES[_json_type(want)]}): rows carry {key} as "
                    f"{_JSON_TYPE_NAMES[other[1]]} {_shown(other[0])}"
                )
    values = ", ".join(_shown(v) for v, _ in carried[:_SHOWN_VALUES])
    more = ", ..." if len(carried) > _SHOWN_VALUES else ""
    return (
        f"no row of collection {collection!r} carries {key} = {_shown(value)} "
        f"(rows carry {key} as {values}{more})"
    )


async def scope_findings(
    engine: AsyncEngine, collection: str, scope: Mapping[str, Any] | None, schema: str = "public"
) -> list[str]:
    """Why ``scope`` keeps no row of the PostgreSQL collection ``schema.collection``.

    Returns:
        ``[]`` when the scope keeps a row, or there is no scope; else one line per cause:
        the collection has no rows yet, or for each key of the scope that keeps no row on
        its own, that no row carries the key, or the value (naming the type rows carry it
        as, when only the type differs), or, when each key keeps rows but not together,
        that no row carries them all. The collection must exist.
    """
    if not scope:
        return []
    rows = table(collection, column("cmetadata", JSONB), schema=schema)
    async with engine.connect() as conn:
        if await _any(conn, rows, compile_filter(rows.c.cmetadata, dict(scope))):
            return []
        if not await _any(conn, rows, literal(True)):
            return [
                f"collection {collection!r} has no rows yet: the scope {_shown(scope)} cannot "
                "be checked; the bot will find nothing until rows that match it are ingested"
            ]
        found = []
        for key, value in scope.items():
            if key in LOGICAL_OPERATORS:
                continue
            finding = await _key_finding(conn, rows, collection, key, value)
            if finding is not None:
                found.append(finding)
    if not found:
        found.append(f"no row of collection {collection!r} carries all of {_shown(scope)}")
    return found
