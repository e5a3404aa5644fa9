"""Hierarchy markers kept in ``cmetadata``, and the SQL predicates that read them.

The key names and predicates follow the parent-child retrieval spec (FEAT-128):

* children: ``is_chunk: true`` and ``parent_document_id``;
* 2-level parents (a whole document): ``is_full_document: true``;
* 3-level parents (a slice of a long document): ``document_type: "parent_chunk"``;
* indexed rows (text an ingestion strategy wrote, never returned):
  ``document_type: "indexed"``, ``is_chunk: false`` and ``indexes``, the id of the
  retrievable row (a child or a parent) that a hit on them resolves to. They carry no
  ``parent_document_id`` and no ``chunk_index``, so no parent, sibling or neighbour read
  can see them, and ``offsets_exact: false``: their text is not a slice of the source.

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
    "HIERARCHY_KEYS",
    "INDEXED",
    "INDEXED_CONTAINMENT",
    "INDEXED_MARKER",
    "INDEXED_PREDICATE",
    "INDEXES",
    "IS_CHUNK",
    "IS_FULL_DOCUMENT",
    "NOT_COPIED_TO_INDEXED",
    "NOT_INDEXED_PREDICATE",
    "NOT_SHARED_WITH_INDEXED",
    "OFFSETS_EXACT",
    "PARENT_CHUNK",
    "PARENT_DOCUMENT_ID",
    "PARENT_PREDICATE",
    "SEARCHABLE",
    "SEARCH_PREDICATE",
    "SOURCE",
    "START_INDEX",
    "RowKind",
    "int_marker",
    "is_indexed",
    "is_parent",
    "is_searchable",
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
#: Indexed rows (ingestion strategies): their ``document_type``, the id of the row they
#: stand for, and the flag saying their text is not a slice of the source.
INDEXED = "indexed"
INDEXES = "indexes"
OFFSETS_EXACT = "offsets_exact"
#: ``searchable: false`` on a child: it is indexed only through its indexed rows (an
#: ingestion strategy replaced its text in the index), so it is stored without a vector
#: and stays out of the HNSW and lexical indexes; it is still returned, expanded, counted.
SEARCHABLE = "searchable"

#: The hierarchy keys of a child or a parent, which a row standing for it in the index
#: must not carry (it is no span, no sibling, no neighbour).
HIERARCHY_KEYS = frozenset(
    {
        IS_CHUNK,
        IS_FULL_DOCUMENT,
        DOCUMENT_TYPE,
        PARENT_DOCUMENT_ID,
        CHUNK_INDEX,
        START_INDEX,
        END_INDEX,
        "content_sha256",
        SEARCHABLE,
    }
)
#: The keys of a child (or parent) that a row standing for it does not copy: the hierarchy
#: keys, the record of the document's ingestion (on parents), the retrieval preamble (the
#: indexed row's own text carries the heading path) and the stored sentences (they stay
#: on the child, the row the packer trims).
NOT_COPIED_TO_INDEXED = HIERARCHY_KEYS | {"ingestion", "retrieval_preamble", "sentences"}
#: The keys whose value on an indexed row is not its target's: those it does not copy,
#: and those that mark it as indexed (``indexed_kind`` and ``strategy`` too). Every other
#: metadata key of the target is copied to it.
NOT_SHARED_WITH_INDEXED = NOT_COPIED_TO_INDEXED | {
    INDEXES,
    OFFSETS_EXACT,
    "indexed_kind",
    "strategy",
}

PARENT_CHUNK = "parent_chunk"
# Legacy collections used document_type='parent' for whole-document parents.
_PARENT_TYPES = frozenset({"parent", PARENT_CHUNK})

RowKind = Literal["child", "parent", "parent_chunk", "indexed"]

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

#: Rows written by an ingestion strategy to be searched in place of a retrievable row.
INDEXED_PREDICATE = "(cmetadata->>'document_type' = 'indexed')"
#: The same rows as a jsonb containment, which the metadata GIN index serves.
INDEXED_MARKER = """'{"document_type": "indexed"}'::jsonb"""
INDEXED_CONTAINMENT = f"cmetadata @> {INDEXED_MARKER}"
#: Rows of a document's own hierarchy (parents and children): anything but indexed rows.
NOT_INDEXED_PREDICATE = f"(NOT coalesce({INDEXED_PREDICATE}, false))"

#: What a search ranks: the children and the indexed rows (resolved to their retrievable
#: rows by the store before anything is returned).
SEARCH_PREDICATE = f"({CHILD_PREDICATE} OR {INDEXED_PREDICATE})"

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


def is_indexed(metadata: dict[str, Any]) -> bool:
    """True when the metadata marks an indexed row (an ingestion strategy's text)."""
    return metadata.get("document_type") == INDEXED


def is_searchable(metadata: dict[str, Any]) -> bool:
    """False for parents and for children marked ``searchable: false``."""
    return not is_parent(metadata) and metadata.get(SEARCHABLE) is not False


def int_marker(metadata: dict[str, Any], key: str) -> int | None:
    """``metadata[key]`` when it is an int (not a bool), else None (absent or malformed)."""
    value = metadata.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def row_kind(metadata: dict[str, Any]) -> RowKind:
    """``"child"``, ``"parent"`` (whole document), ``"parent_chunk"`` or ``"indexed"``."""
    if is_indexed(metadata):
        return "indexed"
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
    * an indexed row gets ``is_chunk: false``;
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
    out["is_chunk"] = not is_parent(out) and not is_indexed(out)
    return out
