"""Interface every vector store of parrot-parents implements."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from langchain_core.documents import Document

from parrot_parents.stores.results import SearchResult
from parrot_parents.stores.search_options import Fusion, SearchMode

__all__ = ["AbstractStore"]


class AbstractStore(ABC):
    """A collection of parent and child rows with vector search over the children."""

    #: True when the store searches indexed rows (ingestion strategies) and resolves a hit
    #: on one to its retrievable row (:mod:`parrot_parents.stores.resolve`).
    supports_indexed_rows: ClassVar[bool] = False

    @abstractmethod
    async def add_documents(
        self,
        documents: Sequence[Document],
        *,
        embeddings: Sequence[Sequence[float] | None] | None = None,
    ) -> list[str]:
        """Insert or update rows; returns their ids in input order."""

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
