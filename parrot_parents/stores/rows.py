"""Turning LangChain documents into table rows: markers, ids, vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.ids import content_document_id, row_id_for
from parrot_parents.stores.markers import is_parent, normalize_markers

__all__ = ["prepare_rows"]


def prepare_rows(
    documents: Sequence[Document],
    embeddings: Sequence[Sequence[float] | None] | None,
    dimension: int,
) -> list[dict[str, Any]]:
    """Rows ``{id, document, cmetadata, embedding}`` for ``documents``, in order.

    Markers are normalised; ``document_id`` defaults to a content hash; the id is
    ``Document.id`` or derived from ``document_id`` and the span; parents get no vector.
    A child's vector is taken from ``embeddings`` (``None`` means: embed it later).

    Raises:
        ConfigurationError: a non-Document, ``embeddings`` of another length than
            ``documents``, or a vector whose length is not ``dimension``.
    """
    if embeddings is not None and len(embeddings) != len(documents):
        raise ConfigurationError(f"got {len(embeddings)} embeddings for {len(documents)} documents")
    rows = []
    for i, doc in enumerate(documents):
        if not isinstance(doc, Document):
            raise ConfigurationError(f"documents[{i}] is {type(doc).__name__}, not Document")
        meta = normalize_markers(doc.metadata or {})
        meta["document_id"] = str(meta.get("document_id") or content_document_id(doc.page_content))
        vector = embeddings[i] if embeddings is not None else None
        if vector is not None and len(vector) != dimension:
            raise ConfigurationError(
                f"embeddings[{i}] has {len(vector)} values, expected {dimension}"
            )
        rows.append(
            {
                "id": doc.id or row_id_for(doc.page_content, meta),
                "document": doc.page_content,
                "cmetadata": meta,
                "embedding": None if is_parent(meta) else vector,
            }
        )
    return rows
