"""One behaviour, every backend: store and parent-searcher conformance.

Each test runs on PostgreSQL (pgvector) and on Milvus Lite (``make_store`` is
parameterised over the backends in ``conftest.py``), with the real embedding model.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from langchain_core.documents import Document

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders import TextLoader
from parrot_parents.stores.backends import parent_searcher_for
from parrot_parents.stores.records.markers import is_parent
from tests.retrieval.test_any_searcher import DOC, MemoryParentSearcher

OTHER = "\n\n".join(
    f"Note {i}. The canteen serves {dish} on day {i}; vegetarian options are always available."
    for i, dish in enumerate(["soup", "pasta", "curry", "salad", "fish", "stew"] * 2)
)
ROW_ID = re.compile(r"^(policy|canteen)#(c|p|doc):\d+-\d+$")


async def _ingest(store: Any, embeddings: Any, *, child_size: int = 120) -> list[Document]:
    # The same rows on every backend: the default strategy adds indexed rows only where a
    # backend can search them (PostgreSQL; tests/strategies covers them).
    loader = TextLoader(child_chunk_size=child_size, embedding=embeddings, indexer=None)
    return await loader.chunk_documents(
        [
            Document(page_content=DOC, metadata={"document_id": "policy", "source": "p.md"}),
            Document(page_content=OTHER, metadata={"document_id": "canteen", "source": "c.md"}),
        ],
        vector_store=store,
        parent_chunk_threshold_tokens=800,
        parent_chunk_size_tokens=800,
        parent_chunk_overlap_tokens=0,
    )


def _split(rows: list[Document], document_id: str | None = None) -> tuple[list, list]:
    mine = [r for r in rows if document_id is None or r.metadata["document_id"] == document_id]
    parents = [r for r in mine if is_parent(r.metadata)]
    return parents, [r for r in mine if not is_parent(r.metadata)]


async def _stored_ids(store: Any, rows: list[Document]) -> set[str]:
    """Ids the backend holds for the parents of ``rows`` and all their children."""
    searcher = parent_searcher_for(store)
    parent_ids = [str(r.id) for r in _split(rows)[0]]
    parents = await searcher.fetch(parent_ids)
    children = await searcher.fetch_children(parent_ids)
    return set(parents) | {c.id for kids in children.values() for c in kids}


async def test_exactly_limit_under_a_selective_filter(make_store) -> None:
    dim = 16
    store = make_store(dimension=dim)
    rng = random.Random(11)
    docs, vectors = [], []
    for i in range(2000):
        tenant = "rare" if i % 50 == 0 else "common"  # 40 of 2000 rows
        meta = {"document_id": f"d{i // 40}", "tenant": tenant, "start_index": i}
        meta["end_index"] = i + 1
        docs.append(Document(page_content=f"row {i}", metadata=meta))
        vectors.append([rng.gauss(0, 1) for _ in range(dim)])
    await store.add_documents(docs, embeddings=vectors)
    query = [rng.gauss(0, 1) for _ in range(dim)]
    for limit in (1, 25, 40):
        got = await store.similarity_search_by_vector(query, limit=limit, filter={"tenant": "rare"})
        assert len(got) == limit
        assert all(r.metadata["tenant"] == "rare" for r in got)
        assert [r.distance for r in got] == sorted(r.distance for r in got)
    every = await store.similarity_search_by_vector(query, limit=100, filter={"tenant": "rare"})
    assert len(every) == 40  # fewer match than asked: all of them


async def test_ids_are_deterministic(make_store, embeddings) -> None:
    first, second = make_store(), make_store()
    rows_a = await _ingest(first, embeddings)
    rows_b = await _ingest(second, embeddings)
    ids = [str(r.id) for r in rows_a]
    assert ids == [str(r.id) for r in rows_b] and len(set(ids)) == len(ids)
    assert all(ROW_ID.match(i) for i in ids)
    assert await _stored_ids(first, rows_a) == set(ids) == await _stored_ids(second, rows_b)


async def test_replace_is_idempotent_and_leaves_no_stale_rows(make_store, embeddings) -> None:
    store = make_store()
    rows = await _ingest(store, embeddings)
    count = await store.count()
    assert count == len(rows)
    again = await _ingest(store, embeddings)
    assert [r.id for r in again] == [r.id for r in rows] and await store.count() == count

    resized = await _ingest(store, embeddings, child_size=300)
    assert {r.id for r in resized} != {r.id for r in rows}
    assert await store.count() == len(resized)
    assert await _stored_ids(store, resized) == {str(r.id) for r in resized}
    found = await store.similarity_search("phone costs", limit=50)
    assert {r.id for r in found} <= {str(r.id) for r in _split(resized)[1]}


async def test_delete_cascades_to_parents_and_children(make_store, embeddings) -> None:
    store = make_store()
    rows = await _ingest(store, embeddings)
    searcher = parent_searcher_for(store)
    parents, children = _split(rows, "policy")
    parent_ids = [str(p.id) for p in parents]
    assert await store.delete("policy") == len(parents) + len(children)
    assert await searcher.fetch(parent_ids) == {}
    assert await searcher.fetch_children(parent_ids) == {}
    assert await searcher.fetch_neighbours([("policy", 0, 1000)]) == {}
    hits = await store.similarity_search("phone costs", limit=50)
    assert hits and {h.metadata["document_id"] for h in hits} == {"canteen"}
    kept = _split(rows, "canteen")[0]
    assert set(await searcher.fetch([str(p.id) for p in kept])) == {str(p.id) for p in kept}
    assert await store.delete("policy") == 0  # deleting twice is harmless
    assert await store.count() == len(rows) - len(parents) - len(children)


async def test_missing_parents_are_absent_and_children_never_returned(
    make_store, embeddings
) -> None:
    store = make_store()
    rows = await _ingest(store, embeddings)
    searcher = parent_searcher_for(store)
    parents, children = _split(rows, "policy")
    parent = parents[0]
    assert await searcher.fetch([]) == {}
    assert await searcher.fetch(["policy#p:nope"]) == {}
    got = await searcher.fetch([str(children[0].id), str(parent.id), "nope", str(parent.id)])
    assert list(got) == [parent.id]
    doc = got[str(parent.id)]
    start, end = doc.metadata["start_index"], doc.metadata["end_index"]
    assert doc.page_content == DOC[start:end] and doc.metadata["document_type"] == "parent_chunk"
    assert await searcher.fetch_children(["nope"]) == {}
    assert await searcher.fetch_neighbours([("nope", 0, 5)]) == {}


async def test_ordering_of_searches_and_reads(make_store, embeddings) -> None:
    store = make_store()
    rows = await _ingest(store, embeddings)
    searcher = parent_searcher_for(store)
    hits = await store.similarity_search("How long do I have to claim phone costs?", limit=12)
    assert len(hits) == 12
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(not is_parent(h.metadata) for h in hits)

    parents, children = _split(rows, "policy")
    by_parent = await searcher.fetch_children([str(p.id) for p in parents])
    for parent in parents:
        expected = [c for c in children if c.metadata["parent_document_id"] == parent.id]
        got = by_parent[str(parent.id)]
        assert [c.id for c in got] == [c.id for c in sorted(expected, key=_start)]
    windows = await searcher.fetch_neighbours([("policy", 3, 6), ("canteen", 0, 1)])
    assert [c.metadata["chunk_index"] for c in windows["policy"]] == [3, 4, 5, 6]
    assert [c.metadata["chunk_index"] for c in windows["canteen"]] == [0, 1]
    for c in windows["policy"]:
        assert c.content == DOC[c.metadata["start_index"] : c.metadata["end_index"]]


def _start(row: Document) -> int:
    return int(row.metadata["start_index"])


@pytest.mark.parametrize("mode", ["parent", "auto_merge:0.1", "window:1"])
@pytest.mark.parametrize("budget", [None, 600])
async def test_every_mode_expands_through_the_backends_searcher(
    make_store, embeddings, mode: str, budget: int | None
) -> None:
    store = make_store()
    rows = await _ingest(store, embeddings)
    question = "How long do I have to claim phone costs?"
    options: dict[str, Any] = {"expand_to_parent": True, "mode": mode, "budget": budget}
    got = await Chatbot(store=store, parent_searcher=parent_searcher_for(store)).retrieve(
        question, limit=4, **options
    )
    # The oracle: the same hits expanded from the loader's own rows, held in memory.
    expected = await Chatbot(store=store, parent_searcher=MemoryParentSearcher(rows)).retrieve(
        question, limit=4, **options
    )
    assert got.meta["expanded"] is True and not got.meta["fallbacks"]
    spans = [(p.kind, p.document_id, p.start_index, p.end_index) for p in got.passages]
    assert spans == [(p.kind, p.document_id, p.start_index, p.end_index) for p in expected.passages]
    assert {"parent": "parent_chunk", "auto_merge:0.1": "parent_chunk", "window:1": "window"}[
        mode
    ] in {p.kind for p in got.passages} or budget is not None
    texts = {"policy": DOC, "canteen": OTHER}
    for p in got.passages:
        assert p.text == texts[p.document_id][p.start_index : p.end_index]
    if budget is not None:
        assert sum(len(p.text) for p in got.passages) <= budget


async def test_bad_limit_and_filter_are_clear_errors(make_store) -> None:
    store = make_store()
    for bad in (0, 10_001, True):
        with pytest.raises(ConfigurationError, match="limit"):
            await store.similarity_search("x", limit=bad)
    with pytest.raises(ConfigurationError, match="filter"):
        await store.similarity_search("x", filter=["not", "a", "dict"])  # type: ignore[arg-type]
