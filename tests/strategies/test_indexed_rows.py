"""Model-backed strategies on a real store, with a scripted LLM: the rows they index, how a
hit on one resolves, how a failed call degrades one chunk, and the reply cache."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from sqlalchemy import select

from parrot_parents.loaders.text import TextLoader
from parrot_parents.retrieval.options import RetrievalOptions
from parrot_parents.retrieval.pipeline import Retriever
from parrot_parents.stores.parents import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.records.markers import INDEXED_PREDICATE
from parrot_parents.strategies import GuardedModel, PromptCache, StrategyIndexer, parse_strategy
from tests.strategies.conftest import AGREEMENT, ScriptedLLM, failing

CHILD = 90


def note_for(chunk: str | None, document: str | None) -> str:
    if chunk and "notice period" in chunk:
        return "From the termination clause of the services agreement: how to end it."
    return f"A passage of the document about {(chunk or '')[:20]}."


async def ingest(
    store: PgVectorStore,
    docs: list[Document],
    spec: str,
    llm: ScriptedLLM | None,
    tmp_path: Path,
    **guard: Any,
) -> TextLoader:
    model = None
    if llm is not None:
        guard.setdefault("backoff_s", 0.0)
        model = GuardedModel(llm, cache=PromptCache(tmp_path / "replies.sqlite3"), **guard)
    indexer = StrategyIndexer(parse_strategy(spec), model)
    loader = TextLoader(child_chunk_size=CHILD, embedding=store.embedding, indexer=indexer)
    await loader.chunk_documents(docs, vector_store=store)
    return loader


async def rows(store: PgVectorStore, indexed: bool) -> list[Any]:
    engine, table = await store.ready()
    from sqlalchemy import text

    pred = text(INDEXED_PREDICATE if indexed else f"NOT coalesce({INDEXED_PREDICATE}, false)")
    async with engine.connect() as conn:
        found = await conn.execute(
            select(table.c.id, table.c.document, table.c.cmetadata, table.c.embedding).where(pred)
        )
        return list(found.all())


def retriever(store: PgVectorStore) -> Retriever:
    return Retriever(store=store, parent_searcher=InTableParentSearcher(store))


async def test_contextual_rows_resolve_to_the_child_with_exact_offsets(
    store: PgVectorStore, corpus: list[Document], tmp_path: Path
) -> None:
    llm = ScriptedLLM(note_for)
    loader = await ingest(store, corpus, "contextual", llm, tmp_path)
    children = [r for r in await rows(store, indexed=False) if r.cmetadata.get("is_chunk")]
    indexed = await rows(store, indexed=True)
    report = loader.report.strategy
    assert report is not None
    assert report["enriched"] == report["of"] == len(children) == len(indexed)
    assert report["calls"] == len(children) and report["failures"] == {}
    assert report["expansion"] == 1.0 and report["partial"] is False
    for row in indexed:
        meta = row.cmetadata
        assert meta["document_type"] == "indexed" and meta["is_chunk"] is False
        assert meta["offsets_exact"] is False and meta["indexed_kind"] == "context"
        assert "parent_document_id" not in meta and "chunk_index" not in meta
        assert row.embedding is not None
        target = next(c for c in children if c.id == meta["indexes"])
        assert row.document.endswith("\n\n" + target.document)
    # Enriched children are indexed only through their rows: no vector of their own.
    assert all(c.embedding is None and c.cmetadata["searchable"] is False for c in children)

    got = await retriever(store).retrieve(
        "termination notice under the services agreement",
        RetrievalOptions(expand_to_parent=False, limit=3),
    )
    # The heading child above it may rank first: its row's vector reads its section.
    rank = next(i for i, p in enumerate(got.passages) if "notice period is thirty days" in p.text)
    assert rank <= 1
    top = got.passages[rank]
    assert top.kind == "child"
    assert top.text == AGREEMENT[top.start_index : top.end_index]
    child = got.meta.to_dict()["children"][rank]
    assert child["via"] == f"{top.id}~ctx0" and child["via_kind"] == "context"
    assert len({p.id for p in got.passages}) == len(got.passages)


async def test_a_failed_call_degrades_that_chunk_alone(
    store: PgVectorStore, corpus: list[Document], tmp_path: Path
) -> None:
    def script(chunk: str | None, document: str | None) -> Any:
        return failing() if chunk and "notice period" in chunk else note_for(chunk, document)

    llm = ScriptedLLM(script)
    loader = await ingest(store, corpus, "contextual", llm, tmp_path, retries=2)
    report = loader.report.strategy
    assert report is not None
    assert report["enriched"] == report["of"] - 1 and report["partial"] is True
    assert report["failures"] == {"error": 1}
    assert report["calls"] == report["of"] - 1 + 3  # the failing one: 1 call + 2 retries
    children = [r for r in await rows(store, indexed=False) if r.cmetadata.get("is_chunk")]
    plain = [c for c in children if "notice period" in c.document]
    assert len(plain) == 1 and plain[0].embedding is not None  # indexed as itself
    assert "searchable" not in plain[0].cmetadata
    assert not [r for r in await rows(store, indexed=True) if r.cmetadata["indexes"] == plain[0].id]
    # the collection's record says it is partly plain
    from parrot_parents.strategies.build import collection_record

    records = await store.ingestion_records()
    assert set(records) == {"agreement", "recipes"}
    total = collection_record(records)
    assert (total["enriched"], total["of"]) == (report["enriched"], report["of"])
    assert total["partial"] is True and total["strategies"] == [report["strategy"]]
    assert records["agreement"]["enriched"] == records["agreement"]["of"] - 1
    parent = next(r for r in await rows(store, indexed=False) if r.id.startswith("agreement#doc"))
    assert parent.cmetadata["ingestion"]["enriched"] == parent.cmetadata["ingestion"]["of"] - 1
    got = await retriever(store).retrieve(
        "what is the notice period", RetrievalOptions(expand_to_parent=False, limit=2)
    )
    assert "notice period" in got.passages[0].text
    assert "via" not in got.meta.to_dict()["children"][0]


@pytest.mark.parametrize(
    ("reply", "kind"),
    [("", "empty"), ("   ", "empty"), ("not json at all", "malformed"), ('{"a": 1}', "malformed")],
)
async def test_empty_and_malformed_replies_are_counted_by_kind(
    store: PgVectorStore, corpus: list[Document], tmp_path: Path, reply: str, kind: str
) -> None:
    def script(chunk: str | None, document: str | None) -> str:
        if chunk and "notice period" in chunk:
            return reply
        return '["What does this say?"]'

    loader = await ingest(store, corpus, "hypothetical-questions:2", ScriptedLLM(script), tmp_path)
    report = loader.report.strategy
    assert report is not None
    assert report["failures"] == {kind: 1}
    assert report["enriched"] == report["of"] - 1


@pytest.mark.parametrize(
    ("spec", "kind", "tag"),
    [("hypothetical-questions:count=2", "question", "q"), ("propositions:2", "proposition", "f")],
)
async def test_questions_and_propositions_resolve_to_their_child_once(
    store: PgVectorStore, corpus: list[Document], tmp_path: Path, spec: str, kind: str, tag: str
) -> None:
    def script(chunk: str | None, document: str | None) -> str:
        if chunk and "notice period" in chunk:
            return '["How long is the termination notice?", "How much notice ends the contract?"]'
        return json.dumps([f"{(chunk or '')[:30]}?", "Another question", "A third one"])

    loader = await ingest(store, corpus, spec, ScriptedLLM(script), tmp_path)
    indexed = await rows(store, indexed=True)
    report = loader.report.strategy
    assert report is not None
    assert len(indexed) == 2 * report["of"]  # the count caps what the model listed
    assert report["expansion"] == 2.0
    assert {r.cmetadata["indexed_kind"] for r in indexed} == {kind}
    got = await retriever(store).retrieve(
        "termination notice", RetrievalOptions(expand_to_parent=False, limit=5)
    )
    ids = [p.id for p in got.passages]
    assert len(ids) == len(set(ids))  # two questions of one child: the child once
    assert "notice period" in got.passages[0].text
    assert got.meta.to_dict()["children"][0]["via"].startswith(f"{ids[0]}~{tag}")


async def test_summary_rows_return_the_whole_document(
    store: PgVectorStore, corpus: list[Document], tmp_path: Path
) -> None:
    def script(chunk: str | None, document: str | None) -> str:
        if document and "Bread" in document:
            return "Two recipes: bread and onion soup."
        return "A services agreement: termination, payment and liability."

    llm = ScriptedLLM(script)
    loader = await ingest(store, corpus, "summary", llm, tmp_path)
    report = loader.report.strategy
    assert report is not None
    assert (report["enriched"], report["of"], report["calls"]) == (2, 2, 2)
    got = await retriever(store).retrieve(
        "cooking recipes", RetrievalOptions(expand_to_parent=False, limit=1)
    )
    assert got.passages[0].kind == "parent"
    assert got.passages[0].id == f"recipes#doc:0-{len(corpus[1].page_content)}"
    assert got.passages[0].text == corpus[1].page_content
    # Window expansion leaves a returned parent as it is.
    windowed = await retriever(store).retrieve(
        "cooking recipes", RetrievalOptions(expand_to_parent=True, mode="window:1", limit=1)
    )
    assert windowed.passages[0].text == corpus[1].page_content


async def test_indexed_rows_never_appear_where_children_or_parents_are_expected(
    store: PgVectorStore, corpus: list[Document], tmp_path: Path
) -> None:
    llm = ScriptedLLM(lambda c, d: '["Q one?", "Q two?"]')
    await ingest(store, corpus, "hypothetical-questions:2", llm, tmp_path)
    indexed = {r.id for r in await rows(store, indexed=True)}
    stored = await rows(store, indexed=False)
    kids: dict[str, list[str]] = {}
    for r in stored:
        if r.cmetadata.get("is_chunk"):
            kids.setdefault(r.cmetadata["parent_document_id"], []).append(r.id)
    assert indexed and len(kids) == 2
    searcher = InTableParentSearcher(store)
    siblings = await searcher.fetch_children(list(kids))
    assert {p: sorted(s.id for s in rows_) for p, rows_ in siblings.items()} == {
        p: sorted(ids) for p, ids in kids.items()
    }
    neighbours = await searcher.fetch_neighbours([("agreement", 0, 10_000)])
    assert sorted(n.id for n in neighbours["agreement"]) == sorted(
        kids[f"agreement#doc:0-{len(AGREEMENT)}"]
    )
    assert await searcher.fetch(sorted(indexed)) == {}
    listing = await store.document_rows("agreement")
    assert listing and {r.kind for r in listing} == {"parent", "child"}
    assert {r.id for r in listing}.isdisjoint(indexed)
    assert await store.count(include_parents=False) == sum(len(v) for v in kids.values())
    # auto_merge counts the real siblings only, whatever the indexed rows matched
    got = await retriever(store).retrieve(
        "Q one?", RetrievalOptions(expand_to_parent=True, mode="auto_merge:0.5", limit=10)
    )
    assert got.meta.auto_merge
    for pid, report in got.meta.auto_merge.items():
        assert report["children"] == len(kids[pid])
    # every hit came through an indexed row (the children have no vector of their own)
    assert all(c["via"] in indexed for c in got.meta.to_dict()["children"])


async def test_a_second_ingest_makes_zero_model_calls(
    store: PgVectorStore, corpus: list[Document], tmp_path: Path
) -> None:
    first = ScriptedLLM(note_for)
    await ingest(store, corpus, "contextual", first, tmp_path)
    calls = len(first.prompts)
    assert calls > 0
    again = ScriptedLLM(note_for)
    loader = await ingest(store, corpus, "contextual", again, tmp_path)
    report = loader.report.strategy
    assert report is not None
    assert again.prompts == [] and report["calls"] == 0
    assert report["cache_hits"] == calls == report["enriched"] == report["of"]
    # another model is another key: it pays
    other = ScriptedLLM(note_for, model="m2")
    await ingest(store, corpus, "contextual", other, tmp_path)
    assert len(other.prompts) == calls


async def test_extractive_contextual_needs_no_model(
    store: PgVectorStore, corpus: list[Document], tmp_path: Path
) -> None:
    loader = await ingest(store, corpus, "contextual:extractive", None, tmp_path)
    report = loader.report.strategy
    assert report is not None
    assert report["enriched"] == report["of"] > 0 and report["calls"] == 0
    texts = {r.cmetadata["indexes"]: r.document for r in await rows(store, indexed=True)}
    notice = next(t for t in texts.values() if "notice period" in t)
    assert notice.startswith("Document: a.md\nSection: Services agreement > Termination\n\n")
    soup = next(t for t in texts.values() if t.endswith("cook for an hour."))
    assert soup.startswith("Document: r.md\nSection: Soup\n\n")


async def test_a_store_that_cannot_resolve_indexed_rows_is_refused_before_writing(
    store: PgVectorStore, corpus: list[Document], tmp_path: Path
) -> None:
    from parrot_parents.errors import ConfigurationError
    from parrot_parents.stores.abstract import AbstractStore
    from parrot_parents.stores.protocols import IndexedRows

    class NoIndexedRows(AbstractStore):
        """Writes and searches through the real store, but declares no IndexedRows."""

        async def add_documents(self, documents: Any, *, embeddings: Any = None) -> list[str]:
            return await store.add_documents(documents, embeddings=embeddings)

        async def similarity_search(self, query: str, *args: Any, **kwargs: Any) -> Any:
            return await store.similarity_search(query, *args, **kwargs)

        async def delete(self, document_id: str) -> int:
            return await store.delete(document_id)

    other = NoIndexedRows()
    assert not isinstance(other, IndexedRows)
    loader = TextLoader(
        embedding=store.embedding, indexer=StrategyIndexer(parse_strategy("contextual:extractive"))
    )
    with pytest.raises(ConfigurationError, match="NoIndexedRows cannot search indexed rows"):
        await loader.chunk_documents(corpus, vector_store=other)
    assert await store.count() == 0


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
async def test_limit_rows_still_come_back_after_deduplication(
    store: PgVectorStore, corpus: list[Document], tmp_path: Path, mode: str
) -> None:
    def script(chunk: str | None, document: str | None) -> str:
        return json.dumps([f"What about {chunk}?", f"Tell me about {chunk}"])

    loader = await ingest(store, corpus, "hypothetical-questions:2", ScriptedLLM(script), tmp_path)
    report = loader.report.strategy
    assert report is not None and report["enriched"] == report["of"]
    children = report["of"]
    # every indexed row holds "tell", so each mode ranks all of them
    found = await store.similarity_search("tell me", limit=children, search_mode=mode)
    expected = {r.id for r in await rows(store, indexed=False) if r.cmetadata.get("is_chunk")}
    assert sorted(r.id for r in found) == sorted(expected)
    assert all(r.via is not None and r.via.startswith(r.id + "~q") for r in found)
