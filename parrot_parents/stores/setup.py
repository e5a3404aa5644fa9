"""Connecting a store to its server: DSNs, the pgvector extension, the schema check."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from parrot_parents.errors import SchemaMismatchError, StoreError
from parrot_parents.stores.engine import is_unavailable, store_error

__all__ = ["check_dimension", "create_extension", "stored_dimension"]


async def create_extension(engine: AsyncEngine) -> None:
    """``CREATE EXTENSION IF NOT EXISTS vector``.

    Raises:
        StoreError: the server lacks pgvector or refuses (the message names the error class).
    """
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
    except (OSError, SQLAlchemyError) as exc:
        # Only the database's own refusal is about pgvector; anything else (down, or no
        # pooled connection free) is described as any other store error.
        if is_unavailable(exc) or not isinstance(exc, DBAPIError):
            raise store_error(exc, "connecting to the database") from exc
        raise StoreError(
            f"cannot prepare the pgvector extension: {exc.__class__.__name__}",
            hint="the server needs pgvector >= 0.8 installed",
        ) from exc


async def check_dimension(conn: AsyncConnection, schema: str, table: str, expected: int) -> None:
    """Fail fast when an existing table's ``embedding`` column has another dimension.

    Raises:
        SchemaMismatchError: no ``embedding`` column, or ``vector(n)`` with ``n != expected``.
    """
    row = await conn.execute(
        text(
            "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = :schema AND c.relname = :table"
            " AND a.attname = 'embedding' AND NOT a.attisdropped"
        ),
        {"schema": schema, "table": table},
    )
    found = row.scalar_one_or_none()
    name = f"{schema}.{table}"
    if found is None:
        raise SchemaMismatchError(
            f"table {name} has no 'embedding' column", expected_dimension=expected
        )
    actual = int(found.split("(")[1].rstrip(")")) if "(" in found else None
    if actual != expected:
        raise SchemaMismatchError(
            f"table {name} stores {found}, the model gives vector({expected})",
            expected_dimension=expected,
            actual_dimension=actual,
            hint="use another table, or the model the table was built with",
        )


async def stored_dimension(conn: AsyncConnection, schema: str, table: str) -> int | None:
    """The dimension ``n`` of the ``vector(n)`` column ``embedding`` of ``schema.table``.

    Read from the catalog, so a reader that never embeds (``parrot-parents show``) can open
    a collection without loading the model.

    Returns:
        ``n``, or None when the table (or its ``embedding`` column, or its typmod) is missing.
    """
    row = await conn.execute(
        text(
            "SELECT a.atttypmod FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = :schema AND c.relname = :table"
            " AND a.attname = 'embedding' AND NOT a.attisdropped"
        ),
        {"schema": schema, "table": table},
    )
    typmod = row.scalar_one_or_none()
    return int(typmod) if typmod is not None and typmod > 0 else None
