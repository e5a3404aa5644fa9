"""Alembic environment: runs the revisions over asyncpg (SQLAlchemy's async engine).

The database comes from ``Config.attributes["connection"]`` (an open sync-facade
connection, for callers already inside ``run_sync``), else ``Config.attributes["dsn"]``,
else ``$PARROT_PARENTS_DSN``, else the embedded server. Each revision runs in its own
transaction, under an advisory lock so that two processes never migrate at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from typing import Any

from alembic import context
from alembic.runtime.migration import MigrationContext, MigrationInfo
from sqlalchemy import Connection, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from parrot_parents.errors import ConfigurationError
from parrot_parents.migrations import VERSION_TABLE

# Arbitrary constant shared by every parrot-parents process ("pp" + "migr").
_LOCK_KEY = 0x7070_6D69_6772

config = context.config


def _record(
    ctx: MigrationContext, step: MigrationInfo, heads: Collection[Any], run_args: Mapping[str, Any]
) -> None:
    """List each revision applied in ``Config.attributes["applied"]``, when the caller
    asked (:func:`parrot_parents.migrations.upgrade` does): what this process ran, not
    what another one ran while this one waited for the lock."""
    applied = config.attributes.get("applied")
    if applied is not None and step.is_upgrade:
        applied.extend(step.up_revision_ids)


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=None,
        version_table=VERSION_TABLE,
        transaction_per_migration=True,
        on_version_apply=_record,
    )
    connection.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _LOCK_KEY})
    try:
        # Commit the lock statement's implicit transaction so that each revision gets its own.
        connection.commit()
        with context.begin_transaction():
            context.run_migrations()
    finally:
        # A failed revision left its transaction rolled back or aborted; start clean.
        connection.rollback()
        connection.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _LOCK_KEY})
        connection.commit()


async def _run_async(url: str) -> None:
    engine = create_async_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            await conn.run_sync(_run)
    finally:
        await engine.dispose()


def _url() -> str:
    from parrot_parents.embedded.server import resolve_dsn
    from parrot_parents.stores.postgres.connections.dsn import to_async_dsn

    return to_async_dsn(resolve_dsn(config.attributes.get("dsn")))


if context.is_offline_mode():
    raise ConfigurationError(
        "offline (--sql) migrations are not supported",
        hint="the collection revision inspects the live database; run against a server",
    )

_connection = config.attributes.get("connection")
if _connection is not None:
    _run(_connection)
else:
    asyncio.run(_run_async(_url()))
