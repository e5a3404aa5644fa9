"""ai-parrot's parent searcher over a parrot-parents collection, and its registry type.

``create_parent_searcher({"type": "parrot_parents"}, store=bot.store)`` (ai-parrot's own
factory, reading a bot row's ``parent_searcher_config``) builds a
:class:`ParrotParentsSearcher` once :func:`register` has run; importing
:mod:`parrot_parents.integrations.ai_parrot` runs it. ai-parrot reads its registry as a
plain dict (``PARENT_SEARCHER_TYPES``) and scans no entry points, so the type is added on
import: a process that builds bots from rows imports this package first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parrot_parents.integrations.ai_parrot.documents import row_document
from parrot_parents.integrations.ai_parrot.framework import (
    PARENT_SEARCHER_TYPES,
    ConfigError,
    FrameworkDocument,
    FrameworkParentSearcher,
)
from parrot_parents.stores.parents.abstract import AbstractParentSearcher
from parrot_parents.stores.parents.in_table import InTableParentSearcher
from parrot_parents.stores.parents.scoped import ScopedParentSearcher
from parrot_parents.stores.postgres import PgVectorStore

__all__ = ["TYPE_NAME", "ParrotParentsSearcher", "build_searcher", "register"]

#: The ``type`` of a ``parent_searcher_config`` that names this searcher.
TYPE_NAME = "parrot_parents"

#: Keys a ``parent_searcher_config`` of this type may carry besides ``type``.
CONFIG_KEYS = frozenset({"collection", "dsn", "schema", "expand_to_parent"})


class ParrotParentsSearcher(FrameworkParentSearcher):
    """Fetches parents from a parrot-parents collection for an ai-parrot bot.

    One statement per call (``SELECT ... WHERE id = ANY(:ids)``, the in-table searcher's),
    misses omitted, children never returned. Each parent comes back as an ai-parrot
    ``Document`` whose ``metadata`` is the stored row's: ``document_id``, the offsets
    ``start_index``/``end_index`` (characters of the source document), ``section_path``,
    ``layer``..., plus ``id``.

    A ``ParrotParentsStore`` with a scope confines the reads to it, as the pipeline's
    expansion does: a parent outside the scope, or holding a child outside it, is left
    out (ai-parrot then keeps the child it had).

    Args:
        store: the collection (:class:`~parrot_parents.stores.postgres.PgVectorStore`), or
            a :class:`~parrot_parents.integrations.ai_parrot.store.ParrotParentsStore`
            over one (and its scope).
        searcher: the parrot-parents searcher doing the reads; default the in-table one
            over ``store``.
    """

    def __init__(self, store: Any, searcher: AbstractParentSearcher | None = None) -> None:
        collection = collection_of(store)
        self.store = collection
        self.searcher = searcher or InTableParentSearcher(store=collection)
        self.scope = scope_of(store)

    async def fetch(self, parent_ids: list[str]) -> dict[str, FrameworkDocument]:
        """``{parent_id: Document}`` for the ids found; ``{}`` for no ids, without a read.

        Raises:
            CollectionNotFoundError: the collection does not exist.
            StoreError: the database failed.
        """
        if not parent_ids:
            return {}
        reads = self.searcher
        if self.scope is not None:
            # A searcher of its own per call: it keeps what it withheld.
            reads = ScopedParentSearcher(self.searcher, self.store, self.scope)
        found = await reads.fetch(parent_ids)
        return {pid: row_document(doc) for pid, doc in found.items()}

    async def health_check(self) -> bool:
        """True when the collection answers a trivial query."""
        return await self.searcher.health_check()


def scope_of(store: Any) -> dict[str, Any] | None:
    """The scope of a ``ParrotParentsStore``; None for a bare collection."""
    from parrot_parents.integrations.ai_parrot.store import ParrotParentsStore

    return store.scope if isinstance(store, ParrotParentsStore) else None


def collection_of(store: Any) -> PgVectorStore:
    """The parrot-parents collection behind ``store``.

    Raises:
        ConfigError: ``store`` is neither a parrot-parents collection nor an ai-parrot
            store over one.
    """
    from parrot_parents.integrations.ai_parrot.store import ParrotParentsStore

    if isinstance(store, ParrotParentsStore):
        return store.collection_store
    if isinstance(store, PgVectorStore):
        return store
    raise ConfigError(
        f"the {TYPE_NAME!r} parent searcher reads a parrot-parents collection, and the "
        f"bot's store is a {type(store).__name__}; use vector_store_config "
        f"{{'name': '{TYPE_NAME}', 'table': ...}} or give 'collection' in the config"
    )


def build_searcher(config: Mapping[str, Any], store: Any) -> ParrotParentsSearcher:
    """The builder ai-parrot's factory calls for ``{"type": "parrot_parents", ...}``.

    ``config`` (without ``type``): ``collection`` (a table name; default: the bot's
    store), ``dsn`` (default ``$PARROT_PARENTS_DSN``, else the embedded server),
    ``schema`` (default ``public``); ``expand_to_parent`` is the bot's, left to it.

    Raises:
        ConfigError: an unknown key, or no collection to read (no ``collection`` and a
            bot store that is not a parrot-parents one).
    """
    unknown = sorted(set(config) - CONFIG_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(map(repr, unknown))} in a {TYPE_NAME!r} "
            f"parent_searcher_config; known: {', '.join(sorted(CONFIG_KEYS))}"
        )
    collection = config.get("collection")
    if collection is None:
        if store is None:
            raise ConfigError(
                f"the {TYPE_NAME!r} parent searcher needs the bot's store or a "
                "'collection'; call create_parent_searcher() after bot.configure()"
            )
        return ParrotParentsSearcher(store)
    opened = PgVectorStore(
        dsn=config.get("dsn"),
        table=str(collection),
        schema=str(config.get("schema", "public")),
        create=False,
    )
    return ParrotParentsSearcher(opened)


def _builder(config: dict[str, Any], store: Any) -> ParrotParentsSearcher:
    return build_searcher(config, store)


def register() -> None:
    """Add :data:`TYPE_NAME` to ai-parrot's ``PARENT_SEARCHER_TYPES`` (idempotent)."""
    PARENT_SEARCHER_TYPES[TYPE_NAME] = _builder
