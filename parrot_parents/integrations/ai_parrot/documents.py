"""Conversions between parrot-parents rows and passages and ai-parrot's result objects.

ai-parrot hands its prompt and its reranker :class:`~parrot.stores.models.SearchResult`
objects, and its parent searchers return :class:`~parrot.stores.models.Document` objects.
Ours carry more (offsets, section path, layer, branch ranks): it travels in ``metadata``,
under the keys of :meth:`~parrot_parents.retrieval.passages.Passage.to_dict`, so an
ai-parrot user reads the same names as every other surface of this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.documents import Document

from parrot_parents.integrations.ai_parrot.framework import (
    FrameworkDocument,
    FrameworkSearchResult,
)
from parrot_parents.integrations.common import passage_metadata
from parrot_parents.retrieval.passages import Passage

__all__ = ["framework_document", "passage_result", "row_document"]


def row_document(document: Document) -> FrameworkDocument:
    """A stored row (a parent, as a parent searcher reads it) as an ai-parrot ``Document``.

    ``metadata`` is the row's own (``document_id``, ``start_index``/``end_index`` in
    characters, ``section_path``...), with ``document_id`` set and the row's id under
    ``id``: ai-parrot names an expanded parent by ``metadata["document_id"]``.
    """
    metadata = dict(document.metadata)
    metadata.setdefault("id", document.id)
    return FrameworkDocument(page_content=document.page_content, metadata=metadata)


def passage_result(passage: Passage, *, extra: Mapping[str, Any] | None = None) -> Any:
    """A passage as an ai-parrot ``SearchResult``.

    ``score`` is the passage's search score, higher is better (the fused RRF value in
    ``hybrid`` mode, the cosine similarity in ``dense``; 0.0 where a mode gives none).
    ``metadata``: the stored row's metadata (``parent_document_id`` on a child, which
    ai-parrot's own expansion groups by), overlaid with :func:`passage_metadata`
    (``kind``, ``start_index``, ``section_path``, ``dense_score``...) and ``extra``.
    """
    metadata = {**passage.metadata, **passage_metadata(passage), **(extra or {})}
    return FrameworkSearchResult(
        id=passage.id,
        content=passage.text,
        metadata=metadata,
        score=0.0 if passage.score is None else float(passage.score),
    )


def framework_document(document: Any) -> Document:
    """An ai-parrot ``Document`` (or any object with ``page_content`` and ``metadata``) as
    the LangChain ``Document`` our loaders take; metadata is copied, not shared.

    Raises:
        TypeError: ``document`` has no string ``page_content`` or no mapping ``metadata``.
    """
    if not isinstance(document, FrameworkDocument | Document):
        raise TypeError(
            f"expected an ai-parrot Document, got {type(document).__name__}",
        )
    metadata = document.metadata
    if metadata is not None and not isinstance(metadata, Mapping):
        raise TypeError(f"Document.metadata must be a mapping, got {type(metadata).__name__}")
    return Document(page_content=document.page_content, metadata=dict(metadata or {}))
