"""The default ingestion strategy on Milvus Lite: each child is searched (embedded and
BM25-indexed) through its indexed row, "Document: / Section:" above its text, and returned
as itself, as on PostgreSQL; strategies Milvus cannot hold are refused before writing."""

from __future__ import annotations

import importlib.util
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders.extractive import EXTRACTIVE_STRATEGY
from parrot_parents.loaders.text import TextLoader
from tests.conftest import unique_table

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pymilvus") is None, reason="pymilvus is not installed"
)

from parrot_parents.stores.milvus import MilvusStore  # noqa: E402

BODY = "Staff receive the allowance once a year, in March, with their salary. " * 6
GUIDE = f"# Zephyrine handbook\n\n## Uniforms\n\n{BODY}\n"


@pytest.fixture
async def store(embeddings: Any) -> AsyncIterator[MilvusStore]:
    uri = str(Path(tempfile.mkdtemp(prefix="milvus-indexed-")) / "milvus.db")
    s = MilvusStore(uri, unique_table("mvi"), embedding=embeddings)
    try:
        yield s
    finally:
        await s.drop()


async def test_the_default_strategy_searches_children_under_their_headings(
    store: MilvusStore, embeddings: Any, tmp_path: Path
) -> None:
    (tmp_path / "guide.md").write_text(GUIDE, encoding="utf-8")
    report = await TextLoader(tmp_path, embedding=embeddings).ingest(store)
    assert report.strategy["strategy"] == EXTRACTIVE_STRATEGY
    # "Zephyrine" is only in the document's title: the searched text holds it, the
    # returned text does not.
    for mode in ("lexical", "hybrid"):
        found = await store.similarity_search("zephyrine uniforms", limit=5, search_mode=mode)
        hits = [h for h in found if h.content.startswith("Staff receive")]
        assert hits, (mode, found)
        assert "Zephyrine" not in hits[0].content
        assert hits[0].via == f"{hits[0].id}~ctx0" and hits[0].via_kind == "context"
        start, end = hits[0].metadata["start_index"], hits[0].metadata["end_index"]
        assert GUIDE[start:end] == hits[0].content
    records = await store.ingestion_records()
    assert records["guide.md"]["strategy"] == EXTRACTIVE_STRATEGY
    # The dense vector is the searched text's, as PostgreSQL embeds the indexed row.
    [entity] = store.client.get(
        store.collection, ids=[hits[0].id], output_fields=["search_text", "embedding"]
    )
    assert entity["search_text"].startswith("Document: ")
    assert entity["search_text"].endswith(hits[0].content)
    [expected] = await embeddings.aembed_documents([entity["search_text"]])
    assert np.allclose(np.asarray(entity["embedding"]), np.asarray(expected), atol=1e-5)


async def test_plain_children_are_searched_as_themselves(
    store: MilvusStore, embeddings: Any, tmp_path: Path
) -> None:
    (tmp_path / "guide.md").write_text(GUIDE, encoding="utf-8")
    await TextLoader(tmp_path, embedding=embeddings, indexer=None).ingest(store)
    hits = await store.similarity_search("zephyrine", limit=5, search_mode="lexical")
    assert not any(h.content.startswith("Staff receive") for h in hits)
    hits = await store.similarity_search("allowance", limit=3, search_mode="lexical")
    assert hits and hits[0].via is None and hits[0].via_kind is None
    assert await store.ingestion_records() == {}


@pytest.mark.parametrize(
    ("kind", "indexes", "problem"),
    [
        ("question", "d#c:0-10", "one searched text per child"),
        ("context", "d#p", "no child in this write"),
        ("context", "elsewhere", "no child in this write"),
    ],
)
async def test_rows_milvus_cannot_hold_are_refused_before_writing(
    store: MilvusStore, kind: str, indexes: str, problem: str
) -> None:
    base = {"document_id": "d"}
    rows = [
        Document(id="d#p", page_content="Whole text.", metadata={**base, "is_full_document": True}),
        Document(
            id="d#c:0-10",
            page_content="Whole text",
            metadata={**base, "is_chunk": True, "parent_document_id": "d#p", "start_index": 0},
        ),
        Document(
            id="x~q0",
            page_content="What is it?",
            metadata={
                **base,
                "document_type": "indexed",
                "is_chunk": False,
                "indexes": indexes,
                "indexed_kind": kind,
            },
        ),
    ]
    with pytest.raises(ConfigurationError, match=problem):
        await store.replace_document("d", rows)
    assert await store.count() == 0


async def test_two_searched_texts_for_one_child_are_refused(store: MilvusStore) -> None:
    base = {"document_id": "d", "document_type": "indexed", "is_chunk": False}
    rows = [
        Document(id="d#c:0-4", page_content="Text", metadata={"document_id": "d"}),
        *(
            Document(
                id=f"d#c:0-4~ctx{i}",
                page_content=f"Note {i}",
                metadata={**base, "indexes": "d#c:0-4", "indexed_kind": "context"},
            )
            for i in range(2)
        ),
    ]
    with pytest.raises(ConfigurationError, match="second searched text"):
        await store.add_documents(rows)
    assert await store.count() == 0
