"""Markers of indexed rows (ingestion strategies) and of children indexed through them."""

from __future__ import annotations

from langchain_core.documents import Document

from parrot_parents.stores.markers import (
    is_indexed,
    is_parent,
    is_searchable,
    normalize_markers,
    row_kind,
)
from parrot_parents.stores.rows import prepare_rows


def test_an_indexed_row_is_neither_child_nor_parent() -> None:
    meta = normalize_markers({"document_type": "indexed", "indexes": "d#c:0-5"})
    assert meta["is_chunk"] is False
    assert is_indexed(meta) and not is_parent(meta) and row_kind(meta) == "indexed"
    assert normalize_markers(meta) == meta  # idempotent
    assert is_searchable(meta)


def test_a_child_indexed_through_its_rows_gets_no_vector() -> None:
    child = Document(
        id="d#c:0-5",
        page_content="hello",
        metadata={"document_id": "d", "is_chunk": True, "searchable": False},
    )
    row = Document(
        id="d#c:0-5~q0",
        page_content="hi?",
        metadata={"document_id": "d", "document_type": "indexed", "indexes": "d#c:0-5"},
    )
    out = prepare_rows([child, row], [[1.0, 0.0], [0.0, 1.0]], 2)
    assert out[0]["embedding"] is None and out[0]["cmetadata"]["is_chunk"] is True
    assert out[1]["embedding"].tolist() == [0.0, 1.0] and out[1]["cmetadata"]["is_chunk"] is False
