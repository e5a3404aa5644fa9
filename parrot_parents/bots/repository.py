"""The ``bots`` table: read rows, and write them only after :func:`validate_bot`.

The table is created by ``parrot-parents migrate`` (revision 0002). Every write path (this
class, the ``bots`` CLI, the HTTP API) validates with the same function, so a row written
through parrot-parents is always loadable; the table's CHECK constraints back that up for
rows written with plain SQL.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    Integer,
    MetaData,
    Table,
    Text,
    delete,
    insert,
    literal_column,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from parrot_parents.bots.factory import collection_exists
from parrot_parents.bots.registries import Registries
from parrot_parents.bots.scope_check import ScopeWarning, scope_findings
from parrot_parents.bots.settings import BotSettings, apply_changes, validate_bot
from parrot_parents.errors import BotConfigError, BotNotFoundError, StoreError
from parrot_parents.stores.identifiers import validate_identifier
from parrot_parents.stores.postgres.connections.engine import make_engine, store_error

__all__ = ["BotRepository", "bots_table"]

T = TypeVar("T")


def bots_table(name: str = "bots", schema: str = "public") -> Table:
    """SQLAlchemy ``Table`` of the bots table (the migration is the source of truth)."""
    return Table(
        validate_identifier(name, "table"),
        MetaData(),
        Column("id", BigInteger, primary_key=True),
        Column("name", Text, nullable=False, unique=True),
        Column("description", Text, nullable=False),
        Column("collection", Text, nullable=False),
        Column("expand_to_parent", Boolean, nullable=False),
        Column("expansion_mode", Text, nullable=False),
        Column("context_search_limit", Integer, nullable=True),
        Column("rerank_candidates", Integer),
        Column("context_budget", Integer),
        Column("search_mode", Text),
        Column("rrf_k", Integer),
        Column("dense_weight", Float),
        Column("lexical_weight", Float),
        Column("trim", Boolean),
        Column("prf", Boolean),
        Column("reranker_config", JSONB(none_as_null=True)),
        Column("parent_searcher_config", JSONB(none_as_null=True)),
        Column("scope", JSONB(none_as_null=True)),
        Column("enabled", Boolean, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("updated_at", DateTime(timezone=True), nullable=False),
        schema=validate_identifier(schema, "schema"),
    )


def _db_error(exc: SQLAlchemyError, bot: str | None) -> Exception:
    """Turn a driver error into ours, without SQL text."""
    cause = getattr(getattr(exc, "orig", None), "__cause__", None)
    code = getattr(cause, "sqlstate", None) or getattr(getattr(exc, "orig", None), "pgcode", None)
    constraint = getattr(cause, "constraint_name", None)
    if code == "23505":
        return BotConfigError(bot, [("name", "a bot with this name already exists")])
    if code in ("23514", "23502"):
        return BotConfigError(bot, [("", f"rejected by the database constraint {constraint!r}")])
    if code == "42P01":
        return StoreError(
            "the bots table does not exist", hint="run `parrot-parents migrate`", sqlstate=code
        )
    return store_error(exc, "access to the bots table")


def _check_name(name: str) -> None:
    """A name PostgreSQL cannot even store (NUL) names no bot: 404, not a database error."""
    if not isinstance(name, str) or "\x00" in name:
        raise BotNotFoundError(str(name).replace("\x00", "\\x00"))


class BotRepository:
    """CRUD on the bots table; every write is validated first.

    Args:
        dsn: PostgreSQL DSN (default ``$PARROT_PARENTS_DSN``, else the embedded server).
        table, schema: where the bots live, default ``public.bots``.
        registries: type names for the JSON configs; the process default when None.

    Usable with ``async with``. Raises :class:`StoreError` when the table is missing or
    the database fails, :class:`BotConfigError` when a write is invalid, and
    :class:`BotNotFoundError` for an unknown name. A write whose scope keeps no row of
    the bot's collection is saved, with a :class:`ScopeWarning` saying why
    (:meth:`scope_findings`).
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        table: str = "bots",
        schema: str = "public",
        registries: Registries | None = None,
    ) -> None:
        self.table = bots_table(table, schema)
        self.registries = registries
        self._dsn = dsn
        self._engine: AsyncEngine | None = None
        self._lock = asyncio.Lock()

    async def engine(self) -> AsyncEngine:
        """The engine, created on first use."""
        async with self._lock:
            if self._engine is None:
                self._engine = await make_engine(self._dsn)
            return self._engine

    async def close(self) -> None:
        """Dispose of the engine. Safe to call twice."""
        engine, self._engine = self._engine, None
        if engine is not None:
            await asyncio.shield(engine.dispose())

    async def __aenter__(self) -> BotRepository:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def validate(self, data: Mapping[str, Any]) -> BotSettings:
        """:func:`validate_bot` with this repository's registries."""
        return validate_bot(data, registries=self.registries)

    # -- reads --------------------------------------------------------------------------

    async def _run(self, bot: str | None, fn: Callable[[AsyncConnection], Awaitable[T]]) -> T:
        engine = await self.engine()
        try:
            async with engine.begin() as conn:
                return await fn(conn)
        except SQLAlchemyError as exc:
            raise _db_error(exc, bot) from exc
        except OSError as exc:  # refused or reset before the driver wrapped it
            raise store_error(exc, "reading the bots table") from exc

    async def list_rows(self, *, include_disabled: bool = True) -> list[dict[str, Any]]:
        """Raw rows (not validated, so that bad ones can be shown), ordered by name."""
        t = self.table
        stmt = select(t).order_by(t.c.name)
        if not include_disabled:
            stmt = stmt.where(t.c.enabled.is_(True))

        async def go(conn: AsyncConnection) -> list[dict[str, Any]]:
            return [dict(r._mapping) for r in await conn.execute(stmt)]

        return await self._run(None, go)

    async def get_row(self, name: str) -> dict[str, Any]:
        """The raw row of ``name``. Raises :class:`BotNotFoundError`."""
        _check_name(name)
        t = self.table

        async def go(conn: AsyncConnection) -> dict[str, Any] | None:
            row = (await conn.execute(select(t).where(t.c.name == name))).first()
            return None if row is None else dict(row._mapping)

        row = await self._run(name, go)
        if row is None:
            raise BotNotFoundError(name)
        return row

    async def get(self, name: str) -> BotSettings:
        """The validated settings of ``name``. Raises BotNotFoundError, BotConfigError."""
        return self.validate(await self.get_row(name))

    async def fingerprints(self) -> dict[str, str]:
        """``{name: version}`` of every row; a version changes with every write to the row."""
        t = self.table
        stmt = select(t.c.name, literal_column("xmin::text").label("v"), t.c.updated_at)

        async def go(conn: AsyncConnection) -> dict[str, str]:
            rows = await conn.execute(stmt)
            return {r.name: f"{r.v}@{r.updated_at.isoformat()}" for r in rows}

        return await self._run(None, go)

    # -- writes -------------------------------------------------------------------------

    async def scope_findings(self, settings: BotSettings) -> list[str]:
        """Why the bot's scope keeps no row of its collection (see
        :func:`~parrot_parents.bots.scope_check.scope_findings`); ``[]`` when it keeps
        some, when the bot has no scope, or when its collection is no table of this
        database (not created yet, or in another store)."""
        if settings.scope is None:
            return []
        engine = await self.engine()
        if not await collection_exists(engine, settings.collection):
            return []
        try:
            return await scope_findings(engine, settings.collection, settings.scope)
        except SQLAlchemyError as exc:
            raise store_error(exc, "checking the bot's scope") from exc

    async def _warn_scope(self, settings: BotSettings) -> None:
        """A written bot whose scope keeps no row is saved (its rows may come later), but
        never silently: a :class:`ScopeWarning` per finding."""
        for finding in await self.scope_findings(settings):
            message = f"bot {settings.name!r}: scope: {finding}; the bot will find nothing"
            warnings.warn(message, ScopeWarning, stacklevel=3)

    async def create(self, data: Mapping[str, Any]) -> BotSettings:
        """Validate and insert a new bot. Raises BotConfigError (also for a taken name)."""
        settings = self.validate(data)

        async def go(conn: AsyncConnection) -> None:
            await conn.execute(insert(self.table).values(**settings.to_row()))

        await self._run(settings.name, go)
        await self._warn_scope(settings)
        return settings

    async def update(self, name: str, changes: Mapping[str, Any]) -> BotSettings:
        """Apply ``changes`` (dotted keys reach into the JSON configs), validate, write.

        The row is locked while it is read and written, so concurrent updates of one bot
        apply one after the other. Raises BotNotFoundError, BotConfigError.
        """
        _check_name(name)
        t = self.table

        async def go(conn: AsyncConnection) -> BotSettings:
            row = (await conn.execute(select(t).where(t.c.name == name).with_for_update())).first()
            if row is None:
                raise BotNotFoundError(name)
            current = {k: v for k, v in row._mapping.items() if k in BotSettings.model_fields}
            settings = self.validate(apply_changes(current, changes))
            await conn.execute(update(t).where(t.c.id == row.id).values(**settings.to_row()))
            return settings

        settings = await self._run(name, go)
        await self._warn_scope(settings)
        return settings

    async def put(self, name: str, data: Mapping[str, Any]) -> tuple[BotSettings, bool]:
        """Create ``name``, or replace all its settings; returns ``(settings, created)``.

        Keys absent from ``data`` take their defaults. Raises BotConfigError, also when
        ``data["name"]`` differs from ``name``.
        """
        if "name" in data and data["name"] != name:
            raise BotConfigError(name, [("name", f"does not match the bot {name!r}")])
        settings = self.validate({**data, "name": name})
        t = self.table

        async def go(conn: AsyncConnection) -> bool:
            result = await conn.execute(
                update(t).where(t.c.name == name).values(**settings.to_row())
            )
            if result.rowcount:
                return False
            await conn.execute(insert(t).values(**settings.to_row()))
            return True

        created = await self._run(name, go)
        await self._warn_scope(settings)
        return settings, created

    async def delete(self, name: str) -> None:
        """Remove ``name``. Raises BotNotFoundError."""
        _check_name(name)
        t = self.table

        async def go(conn: AsyncConnection) -> int:
            return (await conn.execute(delete(t).where(t.c.name == name))).rowcount

        if not await self._run(name, go):
            raise BotNotFoundError(name)
