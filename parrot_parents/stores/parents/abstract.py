"""Interface of a parent searcher: every read that query-time expansion needs.

Expansion never reads a store directly; it goes through these reads, so parents (and
the children around a hit) can live anywhere a searcher can reach:

* :meth:`~AbstractParentSearcher.fetch`: parents by id (``parent`` mode, spec FEAT-128),
  and :meth:`~AbstractParentSearcher.fetch_text` for the text between a window's children;
* :meth:`~AbstractParentSearcher.fetch_children`: every child of some parents
  (``auto_merge:T`` needs the denominator of its ratio);
* :meth:`~AbstractParentSearcher.fetch_neighbours`: children of a document by
  ``chunk_index`` range (``window:N``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from langchain_core.documents import Document
from pydantic import BaseModel

from parrot_parents.errors import ConfigurationError
from parrot_parents.plugins import PARENT_SEARCHERS_GROUP, Registry
from parrot_parents.stores.results import SearchResult

if TYPE_CHECKING:
    from parrot_parents.stores.abstract import AbstractStore

__all__ = [
    "PARENT_SEARCHERS",
    "AbstractParentSearcher",
    "ChildReads",
    "ChunkRange",
    "StoreParentSearcher",
]

#: ``(document_id, lo, hi)``: the children of a document with ``lo <= chunk_index <= hi``.
ChunkRange = tuple[str, int, int]


class AbstractParentSearcher(ABC):
    """Reads parents, and the children around hits, for query-time expansion.

    Implementations hold whatever they need (a store, a client) and are shared by bots.
    A subclass may set :attr:`config_model`, the pydantic model of the keys a bot row's
    ``parent_searcher_config`` may carry for it (see :mod:`parrot_parents.plugins`).
    """

    #: Keys of ``parent_searcher_config`` (besides ``type``); None: from ``__init__``.
    config_model: ClassVar[type[BaseModel] | None] = None

    #: The store whose parents this searcher reads, when it reads one; a bot given only
    #: the searcher searches that store. None (the default) for parents kept elsewhere.
    store: AbstractStore | None = None

    @classmethod
    def open_store(cls, collection: str, *, embedding: Any = None) -> AbstractStore | None:
        """The store a bot row naming this searcher type searches (not connected yet).

        ``None`` (the default): the row's ``collection`` table in the bots' PostgreSQL
        database. A searcher whose parents live in another backend returns that backend's
        store, so a row chooses its store by the searcher's type name alone.

        Raises:
            ConfigurationError: the backend is not configured in the environment.
        """
        return None

    @abstractmethod
    async def fetch(self, parent_ids: Sequence[str]) -> dict[str, Document]:
        """Fetch parent documents by id.

        Args:
            parent_ids: ids as carried by children in ``parent_document_id``;
                duplicates are allowed.

        Returns:
            ``{parent_id: Document}``. Missing ids are absent from the result; an empty
            input returns ``{}`` without touching the backend. Children are never returned.
        """

    async def fetch_text(self, parent_ids: Sequence[str]) -> dict[str, Document]:
        """Parents by id, as :meth:`fetch`, read only for their text: the caller hands
        over slices of it that span children it read itself (``window:N``), never a whole
        parent. The default is :meth:`fetch`; a searcher that holds parents back for what
        their whole text holds (:class:`~parrot_parents.stores.parents.scoped.ScopedParentSearcher`)
        reads them here without that check."""
        return await self.fetch(parent_ids)

    async def fetch_children(self, parent_ids: Sequence[str]) -> dict[str, list[SearchResult]]:
        """Every child of each parent, ordered by ``start_index``.

        Returns:
            ``{parent_id: [child, ...]}``; parents without children are absent.

        Raises:
            NotImplementedError: this searcher cannot list children (``auto_merge`` then
                degrades to the children, noted in ``meta.fallbacks``).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot list the children of a parent")

    async def fetch_neighbours(self, ranges: Sequence[ChunkRange]) -> dict[str, list[SearchResult]]:
        """Children of each ``(document_id, lo, hi)`` with ``lo <= chunk_index <= hi``.

        Returns:
            ``{document_id: [child, ...]}`` ordered by ``chunk_index``.

        Raises:
            NotImplementedError: this searcher cannot read neighbours (``window`` then
                degrades to the children, noted in ``meta.fallbacks``).
        """
        raise NotImplementedError(f"{type(self).__name__} cannot read neighbouring children")

    def reads_from(self, store: Any) -> bool:
        """True when this searcher reads ``store``'s own table, so that its reads can be
        joined to the store's search statement (one round trip per query). Default False.
        """
        return False

    async def health_check(self) -> bool:
        """Readiness probe used by ``GET /health``. Default: True."""
        return True

    def to_dict(self) -> dict[str, Any]:
        """Configuration of this searcher, for the bots table (``parent_searcher_config``)."""
        return {"type": type(self).__name__}


@runtime_checkable
class ChildReads(Protocol):
    """A store that answers the children reads of expansion itself."""

    async def fetch_children(self, parent_ids: Sequence[str]) -> dict[str, list[SearchResult]]:
        """As :meth:`AbstractParentSearcher.fetch_children`."""
        ...

    async def fetch_chunk_ranges(
        self, ranges: Sequence[ChunkRange]
    ) -> dict[str, list[SearchResult]]:
        """As :meth:`AbstractParentSearcher.fetch_neighbours`."""
        ...


class StoreParentSearcher(AbstractParentSearcher):
    """Reads the parents kept beside their children in one store of :attr:`store_class`,
    and the children through the store's own reads (:class:`ChildReads`).

    Args:
        store: the store holding parents and children.

    Raises:
        ConfigurationError: ``store`` is not a :attr:`store_class`.
    """

    #: The kind of store this searcher reads.
    store_class: ClassVar[type[AbstractStore]]
    store: AbstractStore

    def __init__(self, store: AbstractStore) -> None:
        if not isinstance(store, self.store_class) or not isinstance(store, ChildReads):
            raise ConfigurationError(
                f"{type(self).__name__} needs a {self.store_class.__name__}, "
                f"got {type(store).__name__}"
            )
        self.store = store
        self._reads = store

    async def fetch_children(self, parent_ids: Sequence[str]) -> dict[str, list[SearchResult]]:
        return await self._reads.fetch_children(parent_ids)

    async def fetch_neighbours(self, ranges: Sequence[ChunkRange]) -> dict[str, list[SearchResult]]:
        return await self._reads.fetch_chunk_ranges(ranges)


#: Parent searchers by type name: ``in_table``, ``milvus``, plus the entry points of
#: ``parrot_parents.parent_searchers``.
PARENT_SEARCHERS: Registry[AbstractParentSearcher] = Registry(
    "parent searcher",
    PARENT_SEARCHERS_GROUP,
    AbstractParentSearcher,
    {
        "in_table": ("parrot_parents.stores.parents.in_table:InTableParentSearcher", None),
        "milvus": ("parrot_parents.stores.milvus.parents:MilvusParentSearcher", None),
    },
)
