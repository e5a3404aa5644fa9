"""Deterministic row ids.

An id is derived from the source document's id, the row's kind and its character span,
so re-ingesting a document yields the same ids (idempotent upserts), while two identical
paragraphs at different offsets, or in different documents, keep distinct ids.
"""

from __future__ import annotations

import hashlib
from typing import Any

from parrot_parents.stores.markers import row_kind

__all__ = ["content_document_id", "content_sha256", "make_row_id", "row_id_for"]

_TAGS = {"child": "c", "parent": "doc", "parent_chunk": "p"}


def make_row_id(document_id: str, kind: str, start: int, end: int) -> str:
    """``"<document_id>#<tag>:<start>-<end>"``; tag is ``c``, ``p`` or ``doc``."""
    return f"{document_id}#{_TAGS.get(kind, kind)}:{start}-{end}"


def content_sha256(text: str) -> str:
    """Hex sha256 of a document's text (stored on its parents as ``content_sha256``)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def content_document_id(text: str) -> str:
    """A stable document id for text that arrived without one (sha256 prefix)."""
    # surrogatepass: a lone surrogate must not crash the id of a text (it is reported later)
    return "sha256-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def row_id_for(content: str, metadata: dict[str, Any]) -> str:
    """Id of a row from its metadata; falls back to a content hash when offsets are absent."""
    document_id = str(metadata.get("document_id") or content_document_id(content))
    kind = row_kind(metadata)
    start, end = metadata.get("start_index"), metadata.get("end_index")
    if isinstance(start, int) and isinstance(end, int):
        return make_row_id(document_id, kind, start, end)
    digest = hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{document_id}#{_TAGS.get(kind, kind)}:h{digest}:{metadata.get('chunk_index', 0)}"
