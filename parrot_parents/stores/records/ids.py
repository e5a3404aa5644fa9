"""Deterministic row ids.

An id is derived from the source document's id, the row's kind and its character span,
so re-ingesting a document yields the same ids (idempotent upserts), while two identical
paragraphs at different offsets, or in different documents, keep distinct ids.
"""

from __future__ import annotations

import hashlib
from typing import Any

from parrot_parents.stores.records.markers import row_kind

__all__ = [
    "CONTENT_ID_PREFIX",
    "content_document_id",
    "content_sha256",
    "document_identity",
    "make_row_id",
    "named_by_content",
    "row_id_for",
]

#: The prefix of a document id derived from the text (a document given neither a
#: ``document_id`` nor a ``source``).
CONTENT_ID_PREFIX = "sha256-"

_TAGS = {"child": "c", "parent": "doc", "parent_chunk": "p"}


def make_row_id(document_id: str, kind: str, start: int, end: int) -> str:
    """``"<document_id>#<tag>:<start>-<end>"``; tag is ``c``, ``p`` or ``doc``."""
    return f"{document_id}#{_TAGS.get(kind, kind)}:{start}-{end}"


def content_sha256(text: str) -> str:
    """Hex sha256 of a document's text (stored on its parents as ``content_sha256``)."""
    # surrogatepass: a lone surrogate must not crash the id of a text (it is reported later)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def content_document_id(text: str) -> str:
    """A stable document id for text that arrived without one (sha256 prefix)."""
    return CONTENT_ID_PREFIX + content_sha256(text)[:24]


def document_identity(metadata: dict[str, Any], given_id: str | None, text: str) -> str:
    """The id of a source document: what the user names it by.

    ``metadata["document_id"]`` first, then ``Document.id`` (``given_id``), then
    ``metadata["source"]`` (the file or URL it came from, as LangChain's loaders and its
    indexing API's ``source_id_key`` name a document), and only when there is none of these
    a hash of the text (:func:`content_document_id`). So ingesting an edited text with the
    same ``source`` replaces its earlier version, whereas an edited text named by nothing
    is a new document. Empty strings count as absent; other values are turned into strings.
    """
    for candidate in (metadata.get("document_id"), given_id, metadata.get("source")):
        if candidate is not None and candidate != "":
            return str(candidate)
    return content_document_id(text)


def named_by_content(metadata: dict[str, Any], given_id: str | None) -> bool:
    """True when :func:`document_identity` falls back to the text's hash (no
    ``document_id``, ``Document.id`` or ``source``)."""
    names = (metadata.get("document_id"), given_id, metadata.get("source"))
    return all(c is None or c == "" for c in names)


def row_id_for(content: str, metadata: dict[str, Any]) -> str:
    """Id of a row from its metadata; falls back to a content hash when offsets are absent."""
    document_id = document_identity(metadata, None, content)
    kind = row_kind(metadata)
    start, end = metadata.get("start_index"), metadata.get("end_index")
    if isinstance(start, int) and isinstance(end, int):
        return make_row_id(document_id, kind, start, end)
    digest = content_sha256(content)[:16]
    return f"{document_id}#{_TAGS.get(kind, kind)}:h{digest}:{metadata.get('chunk_index', 0)}"
