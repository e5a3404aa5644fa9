"""Building a bot from a validated row: plugins by type name, the store, the settings.

Used by :class:`~parrot_parents.bots.manager.BotManager` (shared stores) and by
``Chatbot.from_database`` (a store of its own). :func:`build_bot` takes the bot class as an
argument, so this module never imports the bot class it builds.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine

from parrot_parents.bots.abstract import AbstractBot
from parrot_parents.bots.registries import Registries, default_registries
from parrot_parents.bots.settings import BotSettings
from parrot_parents.errors import (
    BotConfigError,
    ParrotParentsError,
    SchemaMismatchError,
    StoreError,
)
from parrot_parents.stores.abstract import AbstractStore
from parrot_parents.stores.identifiers import RESERVED_TABLE_NAMES
from parrot_parents.stores.postgres.collections.creation import collection_state

__all__ = [
    "build_bot",
    "collection_exists",
    "connect_row_store",
    "require_collection",
    "row_store",
]

B = TypeVar("B", bound=AbstractBot)


async def collection_exists(engine: AsyncEngine, collection: str, schema: str = "public") -> bool:
    """True when ``schema.collection`` is a collection: a table with a collection's
    columns, not named like one of the package's own tables (``bots``...). Any other
    table of that name is no collection a bot could search."""
    if collection in RESERVED_TABLE_NAMES:
        return False
    async with engine.connect() as conn:
        state = await conn.run_sync(collection_state, schema, collection)
    return state == "collection"


async def require_collection(
    engine: AsyncEngine, settings: BotSettings, hint: str | None = None
) -> None:
    """Raises BotConfigError on ``collection`` when the row's collection does not exist."""
    if not await collection_exists(engine, settings.collection):
        message = f"no collection named {settings.collection!r} in schema 'public'"
        raise BotConfigError(settings.name, [("collection", message)], hint=hint)


def row_store(
    settings: BotSettings, *, registries: Registries, embedding: Any = None
) -> AbstractStore | None:
    """The store a row's parent searcher type brings (e.g. ``milvus``), not connected;
    None for the row's collection in the bots' PostgreSQL database.

    Raises:
        BotConfigError: the searcher type cannot open its store (e.g. not configured).
    """
    config = settings.parent_searcher_config
    if config is None:
        return None
    try:
        cls = registries.parent_searchers.get(config["type"])
        # The registry gives only subclasses of AbstractParentSearcher, which declares it.
        return cls.open_store(settings.collection, embedding=embedding)
    except ParrotParentsError as exc:
        raise BotConfigError(settings.name, [("parent_searcher_config", exc.message)]) from exc


async def connect_row_store(settings: BotSettings, store: AbstractStore) -> AbstractStore:
    """Connect a store from :func:`row_store`; a missing collection or a dimension
    mismatch becomes a :class:`BotConfigError` on ``collection``."""
    try:
        await store.connect()
    except (SchemaMismatchError, StoreError) as exc:
        await store.close()
        raise BotConfigError(settings.name, [("collection", exc.message)]) from exc
    return store


async def build_bot(
    settings: BotSettings,
    store: AbstractStore,
    *,
    registries: Registries | None = None,
    warm_up: bool = True,
    bot_class: type[B],
    owns_store: bool = True,
) -> B:
    """Build a bot of ``bot_class`` from validated settings and a connected store.

    The parent searcher and reranker are created through ``registries`` by type name.
    ``owns_store``: the bot's ``close()`` closes the store (False when shared).

    Raises:
        BotConfigError: a plugin rejected its config, or the reranker model cannot load
            (with ``warm_up``); the key names the config.
    """
    registries = registries or default_registries()
    name = settings.name
    searcher = reranker = None
    try:
        if settings.parent_searcher_config is not None:
            searcher = registries.parent_searchers.build(
                settings.parent_searcher_config, store=store
            )
    except ParrotParentsError as exc:
        raise BotConfigError(name, [("parent_searcher_config", exc.message)]) from exc
    try:
        if settings.reranker_config is not None:
            reranker = registries.rerankers.build(settings.reranker_config)
            if warm_up:
                await asyncio.to_thread(reranker.warm_up)
    except ParrotParentsError as exc:
        raise BotConfigError(name, [("reranker_config", exc.message)]) from exc
    try:
        bot = bot_class(
            name=name,
            store=store,
            parent_searcher=searcher,
            reranker=reranker,
            owns_store=owns_store,
            settings=settings,
            scope=settings.scope,
            **settings.retrieval_settings(),
        )
    except ParrotParentsError as exc:
        raise BotConfigError(name, [("", exc.message)]) from exc
    return bot
