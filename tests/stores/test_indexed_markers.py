"""Markers of indexed rows (ingestion strategies) and of children indexed through them."""

from __future__ import annotations

from langchain_core.documents import Document

from parrot_parents.stores.records.markers import (
    is_indexed,
    is_parent,
    is_searchable,
    normalize_markers,
    row_kind,
)
from parrot_parents.stores.records.rows import prepare_rows


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


def test_an_indexed_row_copies_no_key_that_a_filter_reads_on_its_target() -> None:
    from parrot_parents.loaders.indexing import INGESTION_KEY, ChunkIndexer
    from parrot_parents.stores.records.markers import NOT_SHARED_WITH_INDEXED
    from parrot_parents.stores.records.sentences import SENTENCES
    from parrot_parents.stores.records.structure_markers import RETRIEVAL_PREAMBLE

    child = {
        "document_id": "d",
        "is_chunk": True,
        "parent_document_id": "d#p",
        "chunk_index": 3,
        "start_index": 0,
        "end_index": 5,
        "source": "d.md",
        "tenant": "t1",
        INGESTION_KEY: {},
        RETRIEVAL_PREAMBLE: "D > Pay",
        SENTENCES: {"spans": []},
    }
    row = ChunkIndexer("contextual:extractive", "context").row("d#c:0-5", child, "t", 0).metadata
    # What the row carries of its own or not at all is judged on the target; the rest is
    # the target's, and a filter on it reads the row itself.
    assert {k for k in child if row.get(k) != child[k]} <= NOT_SHARED_WITH_INDEXED
    assert {"source", "tenant", "document_id"} <= row.keys()
