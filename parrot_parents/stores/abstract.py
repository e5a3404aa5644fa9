"""Interface every vector store of parrot-parents implements.

What a store may do beyond it (batch writes, a documents table, a joined context read,
...) is declared with the protocols of :mod:`parrot_parents.stores.protocols`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Self

from langchain_core.documents import Document

from parrot_parents.stores.results import SearchResult
from parrot_parents.stores.search_options import Fusion, SearchMode

if TYPE_CHECKING:
    from parrot_parents.stores.protocols import Vectors

__all__ = ["AbstractStore"]


class AbstractStore(ABC):
    """A collection of parent and child rows with vector search over the children."""

    async def connect(self) -> AbstractStore:
        """Connect (and create the collection when missing, as the store is configured);
        returns the store. Safe to call twice. Default: nothing to connect."""
        return self

    @abstractmethod
    async def add_documents(
        self,
        documents: Sequence[Document],
        *,
        embeddings: Vectors | None = None,
    ) -> list[str]:
        """Insert or update rows; returns their ids in input order. ``embeddings``: the
        children's vectors aligned with ``documents`` (None entries are embedded here)."""

    @abstractmethod
    async def similarity_search(
        self,
        query: str,
        limit: int = 10,
        include_parents: bool = False,
        filter: dict[str, Any] | None = None,
        *,
        search_mode: SearchMode = "dense",
        fusion: Fusion | None = None,
    ) -> list[SearchResult]:
        """Rows best matching ``query``, best first: ``dense`` (vectors), ``lexical``
        (BM25) or ``hybrid`` (both, fused by RRF with ``fusion``)."""

    @abstractmethod
    async def delete(self, document_id: str) -> int:
        """Remove a source document's parents and children; returns the rows deleted."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Safe to call twice."""

    async def __aenter__(self) -> Self:
        """``async with store:`` connects, and closes when the block ends."""
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
