"""Every expansion mode reads through the parent searcher, so parents can live anywhere.

``MemoryParentSearcher`` keeps the hierarchy in dicts. After the store's own parent rows
are deleted, the in-table searcher finds no parents, yet every mode still expands through
the in-memory one, and gives what the in-table searcher gave before the delete.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from langchain_core.documents import Document
from sqlalchemy import delete, text

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.loaders import TextLoader
from parrot_parents.stores.parents.abstract import AbstractParentSearcher, ChunkRange
from parrot_parents.stores.parents.in_table import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.records.markers import (
    CHUNK_INDEX,
    DOCUMENT_ID,
    PARENT_DOCUMENT_ID,
    PARENT_PREDICATE,
    START_INDEX,
    is_parent,
)
from parrot_parents.stores.results import SearchResult

# Long enough for 3 levels with small parent_chunks: several parents, many children.
DOC = "\n\n".join(
    f"Section {i}. The {w} policy says employees may claim {w} costs up to {i * 10} euros. "
    f"Claims for {w} need a receipt and the approval of a manager within {i} days."
    for i, w in enumerate(["travel", "meal", "phone", "training", "parking", "book"] * 2)
)


class MemoryParentSearcher(AbstractParentSearcher):
    """The hierarchy kept in memory: no database at all."""

    def __init__(self, rows: Sequence[Document]) -> None:
        self.parents = {r.id: r for r in rows if is_parent(r.metadata)}
        self.children = [r for r in rows if not is_parent(r.metadata)]
        self.calls: list[str] = []

    @staticmethod
    def _result(row: Document) -> SearchResult:
        return SearchResult(id=str(row.id), content=row.page_content, metadata=dict(row.metadata))

    async def fetch(self, parent_ids: Sequence[str]) -> dict[str, Document]:
        self.calls.append("fetch")
        return {p: self.parents[p] for p in parent_ids if p in self.parents}

    async def fetch_children(self, parent_ids: Sequence[str]) -> dict[str, list[SearchResult]]:
        self.calls.append("fetch_children")
        out: dict[str, list[SearchResult]] = {}
        for row in sorted(self.children, key=lambda r: r.metadata[START_INDEX]):
            pid = row.metadata.get(PARENT_DOCUMENT_ID)
            if pid in parent_ids:
                out.setdefault(pid, []).append(self._result(row))
        return out

    async def fetch_neighbours(self, ranges: Sequence[ChunkRange]) -> dict[str, list[SearchResult]]:
        self.calls.append("fetch_neighbours")
        out: dict[str, list[SearchResult]] = {}
        for row in sorted(self.children, key=lambda r: r.metadata[CHUNK_INDEX]):
            doc, index = row.metadata[DOCUMENT_ID], row.metadata[CHUNK_INDEX]
            if any(doc == d and lo <= index <= hi for d, lo, hi in ranges):
                out.setdefault(doc, []).append(self._result(row))
        return out


def _spans(retrieval) -> list[tuple[str, int | None, int | None, str]]:  # type: ignore[no-untyped-def]
    return [(p.kind, p.start_index, p.end_index, p.text) for p in retrieval.passages]


@pytest.mark.parametrize("mode", ["parent", "auto_merge:0.1", "window:1"])
@pytest.mark.parametrize("budget", [None, 600])
async def test_every_mode_expands_through_a_searcher_outside_the_store(
    store: PgVectorStore, embeddings, mode: str, budget: int | None
) -> None:
    rows = await TextLoader(child_chunk_size=120, embedding=embeddings).chunk_documents(
        [Document(page_content=DOC, metadata={"document_id": "policy"})],
        vector_store=store,
        parent_chunk_threshold_tokens=800,
        parent_chunk_size_tokens=800,
        parent_chunk_overlap_tokens=0,
    )
    question = "How long do I have to claim phone costs?"
    options = {"expand_to_parent": True, "mode": mode, "budget": budget, "limit": 4}
    in_table = Chatbot(store=store, parent_searcher=InTableParentSearcher(store=store))
    expected = await in_table.retrieve(question, **options)
    assert expected.meta["expanded"] is True

    engine, table = await store.ready()
    async with engine.begin() as conn:  # the store keeps only the children now
        await conn.execute(delete(table).where(text(PARENT_PREDICATE)))
    gone = await in_table.retrieve(question, **options)
    assert gone.meta["expanded"] is False or mode == "window:1"

    memory = MemoryParentSearcher(rows)
    bot = Chatbot(store=store, parent_searcher=memory)
    got = await bot.retrieve(question, **options)
    assert _spans(got) == _spans(expected)
    assert got.meta["expanded"] is True and not got.meta["fallbacks"]
    wanted = {"parent": "fetch", "auto_merge:0.1": "fetch_children", "window:1": "fetch_neighbours"}
    assert wanted[mode] in memory.calls
    for p in got.passages:
        assert p.text == DOC[p.start_index : p.end_index]


async def test_a_searcher_without_the_optional_reads_degrades_and_says_so(
    store: PgVectorStore, embeddings
) -> None:
    class FetchOnly(AbstractParentSearcher):
        async def fetch(self, parent_ids: Sequence[str]) -> dict[str, Document]:
            return {}

    await TextLoader(child_chunk_size=120, embedding=embeddings).chunk_documents(
        [Document(page_content=DOC, metadata={"document_id": "policy"})], vector_store=store
    )
    bot = Chatbot(store=store, parent_searcher=FetchOnly(), expand_to_parent=True)
    r = await bot.retrieve("phone costs", mode="window:1", limit=3)
    assert [p.kind for p in r.passages] == ["child"] * 3  # nothing dropped
    (fallback,) = r.meta["fallbacks"]
    assert fallback["stage"] == "parent_fetch"
    assert "cannot read neighbouring children" in fallback["error"]
