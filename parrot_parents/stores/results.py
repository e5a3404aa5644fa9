"""Result type of :meth:`PgVectorStore.similarity_search`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document

__all__ = ["SearchResult"]


@dataclass(frozen=True)
class SearchResult:
    """One row returned by a similarity search.

    Attributes:
        id: row id.
        content: the row's text.
        metadata: the row's ``cmetadata``.
        score: cosine similarity in [-1, 1], higher is better (``1 - distance``).
        distance: pgvector cosine distance in [0, 2], lower is better; ``None`` for a row
            without an embedding, or when no query vector was used (lexical search).
        dense_rank, lexical_rank: 1-based rank in the dense and the lexical (BM25) branch;
            None when the row was not in that branch's candidates.
        lexical_score: the BM25 score, when the lexical branch ran and found the row.
    """

    id: str
    content: str
    metadata: dict[str, Any] = field(default_factory=dict)
    score: float | None = None
    distance: float | None = None
    dense_rank: int | None = None
    lexical_rank: int | None = None
    lexical_score: float | None = None

    @property
    def page_content(self) -> str:
        """Alias of :attr:`content`, as on LangChain's ``Document``."""
        return self.content

    def to_document(self) -> Document:
        """The row as a LangChain ``Document`` (score and distance are not copied)."""
        return Document(id=self.id, page_content=self.content, metadata=dict(self.metadata))
