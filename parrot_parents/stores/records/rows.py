"""Turning LangChain documents into table rows: markers, ids, vectors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

import numpy as np
from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.records.ids import document_identity, row_id_for
from parrot_parents.stores.records.markers import is_searchable, normalize_markers
from parrot_parents.stores.records.values import (
    check_document_id,
    check_vector,
    clean_text,
    normalize_metadata,
)

__all__ = ["check_document_rows", "embed_missing", "prepare_rows"]


def prepare_rows(
    documents: Sequence[Document],
    embeddings: Sequence[Sequence[float] | np.ndarray | None] | np.ndarray | None,
    dimension: int,
) -> list[dict[str, Any]]:
    """Rows ``{id, document, cmetadata, embedding}`` for ``documents``, in order.

    Markers are normalised; ``document_id`` defaults to the ``source``, else a content
    hash (:func:`~parrot_parents.stores.records.ids.document_identity`); the id is
    ``Document.id`` or derived from ``document_id`` and the span; parents get no vector.
    A child's vector is taken from ``embeddings`` (``None`` means: embed it later): a list
    of floats or a numpy array per document, or one ``(len(documents), dimension)`` array;
    rows hold it as a float32 array of shape ``(dimension,)`` (never a list).

    Every value is checked first (:mod:`parrot_parents.stores.records.values`): text without NUL,
    control characters or lone surrogates, JSON-able metadata (datetimes become ISO 8601),
    a document id of at most 1024 bytes, finite nonzero vectors of ``dimension`` values.

    Raises:
        ConfigurationError: a non-Document, ``embeddings`` of another length than
            ``documents``, or a bad value; the message names the document and the key.
    """
    if embeddings is not None and len(embeddings) != len(documents):
        raise ConfigurationError(f"got {len(embeddings)} embeddings for {len(documents)} documents")
    rows = []
    for i, doc in enumerate(documents):
        if not isinstance(doc, Document):
            raise ConfigurationError(f"documents[{i}] is {type(doc).__name__}, not Document")
        where = f"documents[{i}]"
        try:
            meta = normalize_markers(normalize_metadata(doc.metadata or {}))
            text, replaced = clean_text(doc.page_content)
            # A row names its document as a loader does (document_id, then source, then
            # a hash of the text): see records.ids.document_identity.
            meta["document_id"] = check_document_id(document_identity(meta, None, text))
            where = f"documents[{i}] (document {meta['document_id']!r})"
            if replaced:
                raise ConfigurationError(
                    "page_content contains NUL, control characters or lone surrogates",
                    hint="clean it first, or ingest through a loader, which cleans and reports",
                )
            vector = embeddings[i] if embeddings is not None else None
            if vector is not None:
                vector = check_vector(vector, dimension, f"embeddings[{i}]")
        except ConfigurationError as exc:
            raise ConfigurationError(f"{where}: {exc.message}", hint=exc.hint) from exc
        rows.append(
            {
                "id": doc.id or row_id_for(doc.page_content, meta),
                "document": doc.page_content,
                "cmetadata": meta,
                "embedding": vector if is_searchable(meta) else None,
            }
        )
    return rows


async def embed_missing(
    rows: list[dict[str, Any]],
    embedding: Any,
    batch_size: int,
    *,
    wanted: Callable[[dict[str, Any]], bool] = is_searchable,
    text: Callable[[dict[str, Any]], str] = itemgetter("document"),
) -> None:
    """Embed, in place and in batches of ``batch_size``, the rows given no vector whose
    metadata is ``wanted``, from their ``text``.

    By default parents, and children marked ``searchable: false``, stay without one (they
    never enter a vector index), and a row's vector is made from its ``document``.
    """
    todo = [r for r in rows if r["embedding"] is None and wanted(r["cmetadata"])]
    for start in range(0, len(todo), batch_size):
        batch = todo[start : start + batch_size]
        vectors = await embedding.aembed_documents([text(r) for r in batch])
        matrix = np.asarray(vectors, dtype=np.float32)  # one block, no per-float objects
        for row, vector in zip(batch, matrix, strict=True):
            row["embedding"] = vector


def check_document_rows(document_id: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows``, once every one is known to belong to ``document_id`` (a replace writes
    one document's rows only).

    Raises:
        ConfigurationError: a row of another document (the message names both).
    """
    for row in rows:
        if row["cmetadata"]["document_id"] != document_id:
            raise ConfigurationError(
                f"row {row['id']!r} belongs to {row['cmetadata']['document_id']!r}, "
                f"not {document_id!r}"
            )
    return rows
