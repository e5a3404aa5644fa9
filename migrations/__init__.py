"""Alembic migrations of parrot-parents, shipped in the wheel as ``parrot_parents.migrations``.

The revisions (``versions/``) each say what they create; :func:`history` (``parrot-parents
migrate --history``) lists them, oldest first.

Alembic records the applied revision in ``parrot_parents_alembic_version``, so the package
can share a database with an application's own alembic history.

Every function here is synchronous (alembic is) and opens its own asyncpg connection; call
it through ``asyncio.to_thread`` from async code. Concurrent calls are safe: they run one
at a time within a process, and under an advisory lock across processes. ``dsn`` defaults to
``$PARROT_PARENTS_DSN``, else the embedded server.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from parrot_parents.errors import ConfigurationError
from parrot_parents.migrations.collection_tables import DEFAULT_DIMENSION, ensure_collections
from parrot_parents.stores.identifiers import validate_identifier

__all__ = [
    "DEFAULT_DIMENSION",
    "VERSION_TABLE",
    "alembic_config",
    "apply_pending",
    "current",
    "downgrade",
    "heads",
    "history",
    "script_location",
    "upgrade",
]

#: Table where alembic records the applied revision.
VERSION_TABLE = "parrot_parents_alembic_version"

T = TypeVar("T")

# Alembic's ``context``/``op`` proxies are module globals: one command at a time per
# process. Across processes, env.py takes a PostgreSQL advisory lock.
_COMMAND_LOCK = threading.Lock()


def script_location() -> Path:
    """Directory holding ``env.py`` and ``versions/`` (inside the installed package)."""
    return Path(str(resources.files(__name__)))


def alembic_config(
    dsn: str | None = None,
    *,
    collections: Sequence[str] = (),
    dimension: int = DEFAULT_DIMENSION,
    schema: str = "public",
) -> Config:
    """An alembic ``Config`` for this package's migrations (no ``alembic.ini`` needed).

    Args:
        dsn: PostgreSQL DSN; resolved when the migrations run (see module docstring).
        collections: collection tables that revision 0001 creates (upgrade) or drops
            (downgrade); validated identifiers.
        dimension: embedding length of the created collections, 1..16000, default 384.
        schema: PostgreSQL schema of the collections, default ``"public"``.

    Raises:
        ConfigurationError: a bad collection or schema name, or dimension.
    """
    names = [validate_identifier(c, "collection") for c in collections]
    validate_identifier(schema, "schema")
    if isinstance(dimension, bool) or not isinstance(dimension, int):
        raise ConfigurationError(f"dimension must be an int, got {dimension!r}")
    if not 1 <= dimension <= 16000:
        raise ConfigurationError(f"dimension must be in 1..16000, got {dimension!r}")
    cfg = Config()
    cfg.set_main_option("script_location", str(script_location()))
    # Kept out of the ini options: configparser would interpolate '%' in passwords.
    cfg.attributes.update(dsn=dsn, collections=names, dimension=dimension, schema=schema)
    return cfg


def _resolved(dsn: str | None) -> str:
    from parrot_parents.embedded.server import resolve_dsn
    from parrot_parents.stores.postgres.connections.dsn import to_async_dsn

    return to_async_dsn(resolve_dsn(dsn))


def _with_connection(dsn: str | None, fn: Callable[[Connection], T]) -> T:
    async def go() -> T:
        engine = create_async_engine(_resolved(dsn), poolclass=NullPool)
        try:
            async with engine.begin() as conn:
                return await conn.run_sync(fn)
        finally:
            await engine.dispose()

    return asyncio.run(go())


def upgrade(
    dsn: str | None = None,
    revision: str = "head",
    *,
    collections: Sequence[str] = (),
    dimension: int = DEFAULT_DIMENSION,
    schema: str = "public",
) -> list[str]:
    """Upgrade to ``revision`` (default ``head``), then make sure ``collections`` exist.

    Revision 0001 creates the collections named when it first runs; later calls with new
    names create those too (idempotently), whatever revision the database is at.

    Returns:
        The collections created by this call (tables that did not exist before).

    Raises:
        ConfigurationError: bad names (see :func:`alembic_config`).
        sqlalchemy.exc.SQLAlchemyError, alembic.util.CommandError: the migration failed
            (each revision runs in its own transaction and is rolled back on failure).
    """
    cfg = alembic_config(dsn, collections=collections, dimension=dimension, schema=schema)
    cfg.attributes["created"] = created = []
    _upgrade(cfg, revision)
    if collections:
        created += _with_connection(
            dsn,
            lambda conn: ensure_collections(conn, cfg.attributes["collections"], dimension, schema),
        )
    return list(dict.fromkeys(created))


def apply_pending(dsn: str | None = None) -> list[str]:
    """Upgrade to ``head`` and return the revisions this call applied, oldest first.

    Idempotent and safe when several processes start at once (a service's replicas):
    under the advisory lock, each reads the database's revision and applies only what
    is still missing, so one of them applies the revisions and the others get ``[]``.

    Raises:
        sqlalchemy.exc.SQLAlchemyError, alembic.util.CommandError: as :func:`upgrade`
            (for instance a database user that may not change the schema).
    """
    return _upgrade(alembic_config(dsn), "head")


def _upgrade(cfg: Config, revision: str) -> list[str]:
    """Run alembic's upgrade with ``cfg``; the revisions it applied, in order."""
    applied: list[str] = []
    cfg.attributes["applied"] = applied
    with _COMMAND_LOCK:
        command.upgrade(cfg, revision)
    return list(applied)


def downgrade(
    dsn: str | None = None,
    revision: str = "-1",
    *,
    collections: Sequence[str] = (),
    schema: str = "public",
) -> None:
    """Downgrade to ``revision`` (``"-1"``: one step; ``"base"``: everything).

    Going below 0001 drops the ``collections`` named here, and only those: a downgrade
    never drops a collection it was not told about.
    """
    cfg = alembic_config(dsn, collections=collections, schema=schema)
    with _COMMAND_LOCK:
        command.downgrade(cfg, revision)


def current(dsn: str | None = None) -> str | None:
    """The revision the database is at; None before the first upgrade."""

    def read(conn: Connection) -> str | None:
        ctx = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        return ctx.get_current_revision()

    return _with_connection(dsn, read)


def heads() -> list[str]:
    """Head revision(s) shipped with this package."""
    return list(ScriptDirectory.from_config(alembic_config()).get_heads())


def history() -> list[dict[str, Any]]:
    """Shipped revisions, oldest first: ``[{"revision", "down_revision", "doc"}, ...]``."""
    script = ScriptDirectory.from_config(alembic_config())
    revs = list(script.walk_revisions())[::-1]
    return [{"revision": r.revision, "down_revision": r.down_revision, "doc": r.doc} for r in revs]
