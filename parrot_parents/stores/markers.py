"""Hierarchy markers kept in ``cmetadata``, and the SQL predicates that read them.

The key names and predicates follow the parent-child retrieval spec (FEAT-128):

* children: ``is_chunk: true`` and ``parent_document_id``;
* 2-level parents (a whole document): ``is_full_document: true``;
* 3-level parents (a slice of a long document): ``document_type: "parent_chunk"``.

Every row also carries ``document_id`` (the source document), ``chunk_index`` and
``start_index``/``end_index``: character offsets into the original source text.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = [
    "CHILD_PREDICATE",
    "CHUNK_INDEX",
    "DOCUMENT_ID",
    "DOCUMENT_TYPE",
    "END_INDEX",
    "IS_CHUNK",
    "IS_FULL_DOCUMENT",
    "PARENT_CHUNK",
    "PARENT_DOCUMENT_ID",
    "PARENT_PREDICATE",
    "SOURCE",
    "START_INDEX",
    "RowKind",
    "is_parent",
    "normalize_markers",
    "row_kind",
]

#: Metadata keys of the hierarchy (spec FEAT-128), written by the loaders, read everywhere.
IS_CHUNK = "is_chunk"
PARENT_DOCUMENT_ID = "parent_document_id"
IS_FULL_DOCUMENT = "is_full_document"
DOCUMENT_TYPE = "document_type"
DOCUMENT_ID = "document_id"
CHUNK_INDEX = "chunk_index"
START_INDEX = "start_index"
END_INDEX = "end_index"
SOURCE = "source"

PARENT_CHUNK = "parent_chunk"
# Legacy collections used document_type='parent' for whole-document parents.
_PARENT_TYPES = frozenset({"parent", PARENT_CHUNK})

RowKind = Literal["child", "parent", "parent_chunk"]

#: Default similarity_search filter. Rows without any marker (legacy chunks) stay
#: returnable; rows marked as parents are excluded.
CHILD_PREDICATE = (
    "((cmetadata->>'is_chunk')::boolean = true"
    " OR (cmetadata->>'is_full_document' IS NULL"
    " AND cmetadata->>'document_type' IS NULL))"
)

#: Rows that InTableParentSearcher may return.
PARENT_PREDICATE = (
    "((cmetadata->>'is_full_document')::boolean = true"
    " OR cmetadata->>'document_type' = 'parent_chunk')"
)

_TRUE = {"true", "t", "1", "yes", "y", "on"}
_FALSE = {"false", "f", "0", "no", "n", "off"}


def _as_bool(value: Any) -> bool | None:
    """Coerce legacy boolean spellings ("True", "1", 1) to bool; None stays None."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def is_parent(metadata: dict[str, Any]) -> bool:
    """True when the metadata marks a parent row (full document or parent_chunk)."""
    return bool(_as_bool(metadata.get("is_full_document"))) or (
        metadata.get("document_type") in _PARENT_TYPES
    )


def row_kind(metadata: dict[str, Any]) -> RowKind:
    """``"child"``, ``"parent"`` (whole document) or ``"parent_chunk"``."""
    if metadata.get("document_type") == PARENT_CHUNK:
        return "parent_chunk"
    if is_parent(metadata):
        return "parent"
    return "child"


def normalize_markers(metadata: dict[str, Any]) -> dict[str, Any]:
    """Return a copy of ``metadata`` with canonical hierarchy markers.

    Rules (idempotent: applying them twice changes nothing):

    * a row marked as a parent gets ``is_chunk: false``; ``is_full_document`` is coerced
      to a real boolean, and a legacy ``document_type: "parent"`` becomes
      ``is_full_document: true``;
    * every other row is a child and gets ``is_chunk: true``;
    * legacy string booleans (``"True"``, ``"1"``) are coerced to JSON booleans so that
      the SQL predicates can cast them.
    """
    out = dict(metadata)
    if "is_full_document" in out:
        coerced = _as_bool(out["is_full_document"])
        if coerced is None:
            out.pop("is_full_document")
        else:
            out["is_full_document"] = coerced
    if out.get("document_type") == "parent":
        out["is_full_document"] = True
    out["is_chunk"] = not is_parent(out)
    return out
