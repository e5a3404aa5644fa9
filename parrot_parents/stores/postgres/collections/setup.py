"""Connecting a store to its server: DSNs, the pgvector extension, the schema check."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from parrot_parents.errors import SchemaMismatchError, StoreError
from parrot_parents.stores.postgres.connections.engine import is_unavailable, store_error

__all__ = [
    "ExtensionVersions",
    "check_dimension",
    "create_extension",
    "dimension_mismatch",
    "embedding_column",
    "stored_dimension",
    "vector_versions",
]

logger = logging.getLogger(__name__)


async def create_extension(engine: AsyncEngine, *, create: bool = True) -> None:
    """``CREATE EXTENSION IF NOT EXISTS vector``, warning (once per process) when the
    database's catalog records a newer pgvector than the server's library (see
    :meth:`ExtensionVersions.note`). With ``create=False`` (a reader) only the warning.

    Two first writers of a fresh database would race on the extension's catalog rows
    (a unique violation): a missing extension is created under a transaction-level
    advisory lock, and the second creator then finds it.

    Raises:
        StoreError: the server lacks pgvector or refuses (the message names the error class).
    """
    try:
        async with engine.begin() as conn:
            versions = await vector_versions(conn)
            if versions is None and create:
                await conn.execute(
                    text("SELECT pg_advisory_xact_lock(hashtext('parrot_parents.extension'))")
                )
                await conn.execute(text("CREATE EXTENSION IF NOT EXISTS vector"))
                versions = await vector_versions(conn)
    except (OSError, SQLAlchemyError) as exc:
        # Only the database's own refusal is about pgvector; anything else (down, or no
        # pooled connection free) is described as any other store error.
        if is_unavailable(exc) or not isinstance(exc, DBAPIError):
            raise store_error(exc, "connecting to the database") from exc
        raise StoreError(
            f"cannot prepare the pgvector extension: {exc.__class__.__name__}",
            hint="the server needs pgvector >= 0.8 installed",
        ) from exc
    note = versions.note() if versions is not None else None
    if note is not None and note not in _NOTED:
        _NOTED.add(note)
        logger.warning("%s", note)


_NOTED: set[str] = set()


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


@dataclass(frozen=True)
class ExtensionVersions:
    """pgvector as the database's catalog records it, and as the server's library is."""

    catalog: str
    library: str

    @property
    def catalog_is_newer(self) -> bool:
        """True for a data directory made by a newer pgvector than the server now has."""
        return _version_tuple(self.catalog) > _version_tuple(self.library)

    def note(self) -> str | None:
        """What a newer catalog means, in words; None when the catalog is not newer."""
        if not self.catalog_is_newer:
            return None
        same_minor = _version_tuple(self.catalog)[:2] == _version_tuple(self.library)[:2]
        meaning = (
            "patch releases of one minor version share one SQL surface and on-disk format, "
            "so it keeps working"
            if same_minor
            else "functions or operators added after the library's version will fail"
        )
        return (
            f"pgvector: this database's catalog records version {self.catalog}, the "
            f"server's library is {self.library} (the data directory was made by a newer "
            f"pgvector build); {meaning}. ALTER EXTENSION vector UPDATE has no path down: "
            "leave the catalog as it is, or use a server with pgvector "
            f">= {self.catalog} (parrot-parents doctor shows both)"
        )


async def vector_versions(conn: AsyncConnection) -> ExtensionVersions | None:
    """pgvector's catalog and library versions in ``conn``'s database (None: not created)."""
    row = (
        await conn.execute(
            text(
                "SELECT e.extversion, a.default_version FROM pg_extension e"
                " JOIN pg_available_extensions a ON a.name = e.extname"
                " WHERE e.extname = 'vector'"
            )
        )
    ).one_or_none()
    return None if row is None else ExtensionVersions(catalog=row[0], library=row[1])


async def embedding_column(conn: AsyncConnection, schema: str, table: str, what: str) -> Any:
    """``what`` (SQL over the catalog rows ``c``, the table, and ``a``, its column) of the
    ``embedding`` column of ``schema.table``; None when there is no such column."""
    row = await conn.execute(
        text(
            f"SELECT {what} FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = :schema AND c.relname = :table"
            " AND a.attname = 'embedding' AND NOT a.attisdropped"
        ),
        {"schema": schema, "table": table},
    )
    return row.scalar_one_or_none()


async def check_dimension(conn: AsyncConnection, schema: str, table: str, expected: int) -> None:
    """Fail fast when an existing table's ``embedding`` column has another dimension.

    Raises:
        SchemaMismatchError: no ``embedding`` column, or ``vector(n)`` with ``n != expected``.
    """
    found = await embedding_column(conn, schema, table, "format_type(a.atttypid, a.atttypmod)")
    name = f"{schema}.{table}"
    if found is None:
        raise SchemaMismatchError(
            f"table {name} has no 'embedding' column", expected_dimension=expected
        )
    actual = int(found.split("(")[1].rstrip(")")) if "(" in found else None
    if actual != expected:
        raise dimension_mismatch(name, found, expected, actual)


def dimension_mismatch(
    name: str, stored: str, expected: int, actual: int | None, *, exists: bool = True
) -> SchemaMismatchError:
    """The error of a model whose vectors have ``expected`` values, for the table ``name``
    whose column is ``stored`` (``vector(actual)``; one a write would create with the
    store's model when not ``exists``)."""
    verb = "stores" if exists else "would store (the store's model)"
    return SchemaMismatchError(
        f"table {name} {verb} {stored}, the model gives vector({expected})",
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
    typmod = await embedding_column(conn, schema, table, "a.atttypmod")
    return int(typmod) if typmod is not None and typmod > 0 else None
