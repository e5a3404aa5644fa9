"""``BotManager``: the enabled rows of the ``bots`` table, loaded as :class:`Chatbot`s.

Each row is built on its own: a bad one is recorded in :attr:`BotManager.errors` and never
stops the others. :meth:`BotManager.refresh` re-reads only the rows whose version changed,
so an edited row applies without a restart. Bots on one collection share a store, and all
share one engine and one embedding model; the manager owns the stores, so a bot's
``close()`` leaves a shared store open and :meth:`BotManager.close` closes them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.bots.factory import (
    build_bot,
    connect_row_store,
    require_collection,
    row_store,
)
from parrot_parents.bots.registries import Registries, default_registries
from parrot_parents.bots.repository import BotRepository
from parrot_parents.bots.settings import BotSettings, validate_bot
from parrot_parents.errors import (
    BotConfigError,
    BotNotFoundError,
    ParrotParentsError,
    SchemaMismatchError,
)
from parrot_parents.stores.abstract import AbstractStore
from parrot_parents.stores.postgres import PgVectorStore

__all__ = ["BotManager", "LoadReport"]

logger = logging.getLogger(__name__)
_HEALTH_TIMEOUT_S = 5.0


@dataclass
class LoadReport:
    """What a load, reload or refresh did: bots ``loaded``, ``failed`` (name -> reason),
    ``removed`` (deleted or disabled rows) and ``unchanged``."""

    loaded: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.loaded or self.failed or self.removed)


class BotManager:
    """Loads and serves the bots of a database.

    Args:
        dsn: PostgreSQL DSN (default ``$PARROT_PARENTS_DSN``, else the embedded server).
        embedding: the embedding model shared by every store; all-MiniLM-L6-v2 when None.
            Every collection must have been built with it.
        registries: type names for the JSON configs; the process default when None.
        table, schema: the bots table, default ``public.bots``.
        warm_up: load reranker models while loading bots (default True), so that a
            missing model makes that bot fail at load, not at its first query.
        retry_failed_s: a bot that failed to load (e.g. its collection did not exist yet)
            is tried again by :meth:`refresh` even when its row did not change, at most
            once per this many seconds (default 1.0).

    Attributes:
        bots: ``{name: Chatbot}`` of the bots that loaded.
        errors: ``{name: reason}`` of the enabled rows that did not.

    Usable with ``async with`` (loads on enter, closes on exit).
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        embedding: Any = None,
        registries: Registries | None = None,
        table: str = "bots",
        schema: str = "public",
        warm_up: bool = True,
        retry_failed_s: float = 1.0,
    ) -> None:
        self.dsn = dsn
        self.retry_failed_s = retry_failed_s
        self._failed_at: dict[str, float] = {}
        self.registries = registries or default_registries()
        self.repository = BotRepository(dsn, table=table, schema=schema, registries=self.registries)
        self.warm_up = warm_up
        self.bots: dict[str, Chatbot] = {}
        self.errors: dict[str, str] = {}
        self._embedding = embedding
        self._stores: dict[tuple[str, str], AbstractStore] = {}
        self._versions: dict[str, str] = {}
        self._lock = asyncio.Lock()

    @property
    def embedding(self) -> Any:
        if self._embedding is None:
            from parrot_parents.embeddings.sentence_transformer import (
                SentenceTransformerEmbeddings,
            )

            self._embedding = SentenceTransformerEmbeddings()
        return self._embedding

    def get(self, name: str) -> Chatbot:
        """The loaded bot ``name``.

        Raises:
            BotConfigError: the row exists but failed to load (the reason is in the message).
            BotNotFoundError: no enabled row of that name.
        """
        bot = self.bots.get(name)
        if bot is not None:
            return bot
        if name in self.errors:
            raise BotConfigError(name, [("", self.errors[name])], hint="fix the row and reload")
        known = sorted(self.bots)
        more = f" and {len(known) - 10} more" if len(known) > 10 else ""
        raise BotNotFoundError(name, hint=f"known bots: {known[:10]}{more}")

    # -- loading ------------------------------------------------------------------------

    async def load(self) -> LoadReport:
        """Load every enabled row (rebuilding bots already loaded)."""
        return await self.reload()

    async def reload(self, name: str | None = None) -> LoadReport:
        """Rebuild all bots, or only ``name``, from their current rows."""
        async with self._lock:
            return await self._sync(rebuild=None if name is None else {name})

    async def reload_collection(self, collection: str) -> LoadReport:
        """Rebuild the bots on the PostgreSQL ``collection`` on a fresh store (after it was
        dropped or recreated: the shared store of the old table is closed first), so they
        report a missing collection now rather than failing each request."""
        async with self._lock:
            # The key of a collection of the bots' own database (see _store).
            stale = self._stores.pop(("postgres", collection), None)
            on_stale = {name for name, bot in self.bots.items() if bot.store is stale}
            for name in on_stale:
                # Gone from ``bots`` before the store closes; ``_versions`` still knows
                # them, so a row deleted meanwhile is reported removed.
                self.bots.pop(name)
            if stale is not None:
                await stale.close()
            return await self._sync(rebuild=on_stale)

    async def refresh(self) -> LoadReport:
        """Rebuild only the bots whose rows changed, appeared or went away since the last
        load; a cheap query when nothing changed.

        Raises:
            StoreError: the bots table cannot be read (bots already loaded stay as they are).
        """
        async with self._lock:
            return await self._sync()

    async def _sync(self, rebuild: Collection[str] | None = ()) -> LoadReport:
        """Make the bots served match the table: drop every name served (loaded, failed,
        or seen disabled) whose row is gone, and rebuild the rows that changed, the failed
        ones due a retry, and those in ``rebuild`` (every row when None)."""
        report = LoadReport()
        versions = await self.repository.fingerprints()
        served = set(self.bots) | set(self.errors) | set(self._versions)
        for gone in sorted(served - versions.keys()):
            self._drop(gone, report)
        for bot_name, version in versions.items():
            forced = rebuild is None or bot_name in rebuild
            if (
                not forced
                and self._versions.get(bot_name) == version
                and not self._retry_due(bot_name)
            ):
                report.unchanged.append(bot_name)
                continue
            await self._load_one(bot_name, report)
            self._versions[bot_name] = version
        self._versions = {n: v for n, v in self._versions.items() if n in versions}
        await self._close_unused_stores()
        for bot_name, reason in report.failed.items():
            logger.warning("bot %r not loaded: %s", bot_name, reason)
        return report

    def _retry_due(self, name: str) -> bool:
        """A failed bot is retried (its cause may be gone: a collection created since)."""
        if name not in self.errors:
            return False
        return time.monotonic() - self._failed_at.get(name, 0.0) >= self.retry_failed_s

    def _drop(self, name: str, report: LoadReport) -> None:
        self._failed_at.pop(name, None)
        if self.bots.pop(name, None) is not None or self.errors.pop(name, None) is not None:
            report.removed.append(name)
        self._versions.pop(name, None)

    async def _load_one(self, name: str, report: LoadReport) -> None:
        try:
            row = await self.repository.get_row(name)
        except BotNotFoundError:
            self._drop(name, report)
            return
        if not row.get("enabled", True):
            self._drop(name, report)
            return
        try:
            settings = validate_bot(row, registries=self.registries)
            store = await self._store(settings)
            bot = await build_bot(
                settings,
                store,
                registries=self.registries,
                warm_up=self.warm_up,
                bot_class=Chatbot,
                owns_store=False,
            )
        except ParrotParentsError as exc:
            reason = exc.message if isinstance(exc, BotConfigError) else str(exc)
            self._fail(name, reason.removeprefix(f"bot {name!r}: "), report)
            return
        except Exception as exc:  # an isolated row must never stop the others
            logger.exception("bot %r failed to load", name)
            self._fail(name, f"could not be loaded ({type(exc).__name__})", report)
            return
        self.bots[name] = bot
        self.errors.pop(name, None)
        report.loaded.append(name)

    def _fail(self, name: str, reason: str, report: LoadReport) -> None:
        self.bots.pop(name, None)
        self.errors[name] = reason
        self._failed_at[name] = time.monotonic()
        report.failed[name] = reason

    async def _store(self, settings: BotSettings) -> AbstractStore:
        other = row_store(settings, registries=self.registries, embedding=self.embedding)
        # Bots on one collection of one backend share a store.
        key = ("postgres" if other is None else type(other).__name__, settings.collection)
        store = self._stores.get(key)
        if other is not None:  # the searcher type brings its own backend (e.g. milvus)
            if store is None:
                store = self._stores[key] = await connect_row_store(settings, other)
            return store
        engine = await self.repository.engine()
        # Checked for a store already open too: its collection may have been dropped since.
        await require_collection(
            engine,
            settings,
            f"ingest into it, or run `parrot-parents migrate --collection {settings.collection}`",
        )
        if store is not None:
            return store
        # Every collection shares the repository's engine: a server opens one pool.
        store = PgVectorStore(table=settings.collection, embedding=self.embedding, engine=engine)
        try:
            await store.connect()
        except SchemaMismatchError as exc:
            raise BotConfigError(settings.name, [("collection", exc.message)]) from exc
        self._stores[key] = store
        return store

    async def _close_unused_stores(self) -> None:
        used = {id(b.store) for b in self.bots.values()}
        for key in [k for k, s in self._stores.items() if id(s) not in used]:
            await self._stores.pop(key).close()

    # -- health and lifecycle -----------------------------------------------------------

    async def health(self) -> dict[str, Any]:
        """``{"database": bool, "bots": {name: {"parent_searcher": bool | None}},
        "failed": [names]}``; ``parent_searcher`` is None for a bot without one."""
        database = await self.database_ok()
        bots: dict[str, Any] = {}
        for name, bot in sorted(self.bots.items()):
            ok: bool | None = None
            if bot.parent_searcher is not None:
                try:
                    async with asyncio.timeout(_HEALTH_TIMEOUT_S):
                        ok = bool(await bot.parent_searcher.health_check())
                except Exception:
                    ok = False
            bots[name] = {"parent_searcher": ok}
        return {"database": database, "bots": bots, "failed": sorted(self.errors)}

    async def database_ok(self) -> bool:
        """Whether the database answers ``SELECT 1`` within 5 seconds."""
        try:
            engine = await self.repository.engine()
            async with asyncio.timeout(_HEALTH_TIMEOUT_S), engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except Exception:  # any failure to answer is "down"
            return False
        return True

    async def close(self) -> None:
        """Close the stores and the repository. Safe to call twice."""
        self.bots.clear()
        self._versions.clear()
        stores, self._stores = self._stores, {}
        for store in stores.values():
            await store.close()
        await self.repository.close()

    async def __aenter__(self) -> BotManager:
        await self.load()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
