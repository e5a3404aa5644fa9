"""Each store declares the capabilities it claims (:mod:`parrot_parents.stores.protocols`),
and each declared capability does what its protocol says, on every backend that claims it.

``CLAIMS`` is the table of the protocols module's docstring; a store that gains or loses a
capability changes it here too. A capability's test is skipped on a backend that does not
claim it (the first test checks that it indeed does not).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document

from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders import TextLoader
from parrot_parents.stores.context import ContextPlan
from parrot_parents.stores.postgres.collections.documents import DocumentRecord
from parrot_parents.stores.protocols import (
    BulkLoad,
    ContentLookup,
    ContextSearch,
    DocumentRows,
    DocumentTable,
    IndexedRows,
    Partitioned,
    ReplaceDocument,
    RowCount,
    ScopeCheck,
    SourceLookup,
)
from parrot_parents.stores.records.markers import is_parent
from parrot_parents.strategies import StrategyIndexer, parse_strategy
from tests.retrieval.test_any_searcher import DOC
from tests.stores.conformance.test_conformance import _ingest, _split, _stored_ids

PROTOCOLS: tuple[type, ...] = (
    ReplaceDocument,
    SourceLookup,
    RowCount,
    ContentLookup,
    DocumentTable,
    BulkLoad,
    ContextSearch,
    IndexedRows,
    DocumentRows,
    Partitioned,
    ScopeCheck,
)
CLAIMS: dict[str, set[type]] = {
    "PgVectorStore": set(PROTOCOLS),
    "MilvusStore": {ReplaceDocument, SourceLookup, RowCount, IndexedRows, Partitioned, ScopeCheck},
}
QUESTION = "How long do I have to claim phone costs?"


def _claims(store: Any, protocol: type) -> None:
    """Skip unless ``store`` claims ``protocol``."""
    if protocol not in CLAIMS[type(store).__name__]:
        pytest.skip(f"{type(store).__name__} does not claim {protocol.__name__}")
    assert isinstance(store, protocol)


def _kept(rows: list[Document]) -> list[Document]:
    """Every parent of ``policy`` and the children of its first children's parent only."""
    parents, children = _split(rows, "policy")
    first = children[0].metadata["parent_document_id"]
    return [*parents, *(c for c in children if c.metadata["parent_document_id"] == first)]


async def test_each_store_declares_exactly_the_protocols_it_claims(make_store) -> None:
    store = make_store()
    claimed = CLAIMS[type(store).__name__]
    for protocol in PROTOCOLS:
        name = protocol.__name__
        assert isinstance(store, protocol) == (protocol in claimed), name
        # Named among the class's bases, not only matched by its methods: a missing
        # method is then an error when the store is made.
        assert (protocol in type(store).__mro__) == (protocol in claimed), name


async def test_replace_document_keeps_only_the_new_rows(make_store, embeddings) -> None:
    store = make_store()
    _claims(store, ReplaceDocument)
    rows = await _ingest(store, embeddings)
    kept = _kept(rows)
    canteen = [r for r in rows if r.metadata["document_id"] == "canteen"]
    ids = await store.replace_document("policy", kept)
    assert ids == [str(r.id) for r in kept]
    assert await _stored_ids(store, rows) == {str(r.id) for r in kept + canteen}
    assert await store.count() == len(kept) + len(canteen)


async def test_source_lookup_and_row_count(make_store, embeddings) -> None:
    store = make_store()
    _claims(store, SourceLookup)
    _claims(store, RowCount)
    rows = await _ingest(store, embeddings)
    found = await store.document_sources(["policy", "canteen", "nope", "policy"])
    assert found == {"policy": {"p.md"}, "canteen": {"c.md"}}
    assert await store.document_sources([]) == {}
    assert await store.count() == len(rows)
    children = [r for r in rows if not is_parent(r.metadata)]
    assert await store.count(include_parents=False) == len(children)


async def test_scope_check_judges_parents_and_children_by_their_metadata(
    make_store, embeddings
) -> None:
    store = make_store()
    _claims(store, ScopeCheck)
    rows = await _ingest(store, embeddings)
    ids = [str(r.id) for r in rows]
    policy = {str(r.id) for r in rows if r.metadata["document_id"] == "policy"}
    assert await store.ids_matching([*ids, "nope"], {"document_id": "policy"}) == policy
    parents = {str(r.id) for r in rows if is_parent(r.metadata)}
    assert await store.ids_matching(ids, {"is_chunk": False}) == parents
    assert await store.ids_matching([], {"document_id": "policy"}) == set()
    with pytest.raises(ConfigurationError):
        await store.ids_matching(ids, {"document_id": {"$nope": 1}})


async def test_content_lookup_finds_the_documents_holding_a_text(make_store, embeddings) -> None:
    store = make_store()
    _claims(store, ContentLookup)
    rows = await _ingest(store, embeddings)
    digest = _split(rows, "policy")[0][0].metadata["content_sha256"]
    assert await store.documents_with_content([digest, "0" * 64]) == {digest: {"policy"}}
    assert await store.documents_with_content([]) == {}


async def test_document_table_states_stale_documents_and_batch_writes(
    make_store, embeddings
) -> None:
    store = make_store()
    _claims(store, DocumentTable)
    rows = await _ingest(store, embeddings)
    states = await store.document_states(["policy", "canteen", "nope"])
    assert set(states) == {"policy", "canteen"}
    digest = _split(rows, "policy")[0][0].metadata["content_sha256"]
    assert (states["policy"].content_sha256, states["policy"].source) == (digest, "p.md")

    current = sorted({str(s.policy_version) for s in states.values()})
    assert await store.stale_documents(current) == []
    stale = await store.stale_documents(["cp1-none"])
    assert [r.document_id for r in stale] == ["canteen", "policy"]
    assert stale[1].source_text == DOC and stale[1].source == "p.md"
    after = await store.stale_documents(["cp1-none"], after="canteen", limit=1)
    assert [r.document_id for r in after] == ["policy"]

    # The batch is written whole or not at all: a row of another document refuses it.
    kept = _kept(rows)
    canteen = [r for r in rows if r.metadata["document_id"] == "canteen"]
    with pytest.raises(ConfigurationError, match="belongs to 'canteen'"):
        await store.replace_documents(
            [("policy", kept, None, None), ("policy", canteen, None, None)]
        )
    assert await store.count() == len(rows)

    record = DocumentRecord(
        document_id="policy",
        content_sha256="ab" * 32,
        policy_version="cp1-test",
        source_text=DOC,
        source="moved.md",
    )
    ids = await store.replace_documents([("policy", kept, None, record)])
    assert ids == [[str(r.id) for r in kept]]
    assert await store.count() == len(kept) + len(canteen)
    state = (await store.document_states(["policy"]))["policy"]
    assert (state.content_sha256, state.policy_version, state.source) == (
        "ab" * 32,
        "cp1-test",
        "moved.md",
    )
    await store.replace_document("policy", kept, record=record)
    assert await store.count() == len(kept) + len(canteen)


async def test_bulk_load_builds_the_vector_index_after_the_writes(make_store, embeddings) -> None:
    store = make_store()
    _claims(store, BulkLoad)
    await store.connect()
    assert await store.count() == 0 and await store.vector_index_exists()
    async with store.bulk_load() as load:
        assert not await store.vector_index_exists()
        rows = await _ingest(store, embeddings)
    assert load.build_seconds is not None and load.build_seconds >= 0
    assert await store.vector_index_exists() and await store.count() == len(rows)
    assert len(await store.similarity_search(QUESTION, limit=3)) == 3


async def test_context_search_returns_the_search_and_its_reads(make_store, embeddings) -> None:
    store = make_store()
    _claims(store, ContextSearch)
    rows = await _ingest(store, embeddings)
    plan = ContextPlan(parents=True, window=1)
    results, context = await store.search_with_context(QUESTION, plan, limit=5)
    plain = await store.similarity_search(QUESTION, limit=5)
    assert [(r.id, r.score) for r in results] == [(r.id, r.score) for r in plain]
    wanted = {str(r.metadata["parent_document_id"]) for r in results}
    assert wanted <= context.parent_ids and wanted <= set(context.parents)
    texts = {str(r.id): r.page_content for r in rows}
    assert all(texts[i] == p.page_content for i, p in context.parents.items())
    assert context.neighbours and context.plan == plan

    again = await store.fetch_context([(r.id, r.metadata) for r in results], plan)
    assert set(again.parents) == set(context.parents)
    assert {d: [c.id for c in cs] for d, cs in again.neighbours.items()} == {
        d: [c.id for c in cs] for d, cs in context.neighbours.items()
    }
    assert (await store.fetch_context([], plan)).parents == {}


async def test_indexed_rows_are_recorded_and_never_returned(make_store, embeddings) -> None:
    store = make_store()
    _claims(store, IndexedRows)
    indexer = StrategyIndexer(parse_strategy("contextual:extractive"))
    loader = TextLoader(child_chunk_size=120, embedding=embeddings, indexer=indexer)
    await loader.chunk_documents(
        [Document(page_content=DOC, metadata={"document_id": "policy", "source": "p.md"})],
        vector_store=store,
    )
    assert loader.report.indexed > 0
    records = await store.ingestion_records()
    assert set(records) == {"policy"}
    assert records["policy"]["indexed_rows"] == loader.report.indexed
    hits = await store.similarity_search(QUESTION, limit=10)
    assert hits and all(h.metadata.get("document_type") != "indexed" for h in hits)


async def test_document_rows_lists_a_documents_rows_parents_first(make_store, embeddings) -> None:
    store = make_store()
    _claims(store, DocumentRows)
    rows = await _ingest(store, embeddings)
    parents, children = _split(rows, "policy")
    got = await store.document_rows("policy")
    assert sorted(r.id for r in got) == sorted(str(r.id) for r in parents + children)
    kinds = [r.kind for r in got]
    assert kinds == sorted(kinds, key=lambda k: k == "child") and "child" in kinds
    lengths = {str(r.id): len(r.page_content) for r in rows}
    assert all(r.length == lengths[r.id] for r in got)
    assert await store.document_rows("nope") == []


async def test_a_partitioned_store_names_its_collection_s_key_once_connected(make_store) -> None:
    keyed = make_store(partition_key="tenant")
    _claims(keyed, Partitioned)
    assert keyed.collection_partition_key() is None  # not yet connected
    await keyed.connect()
    assert keyed.collection_partition_key() == "tenant"
    plain = make_store()
    await plain.connect()
    assert plain.collection_partition_key() is None


async def test_a_partitioned_store_keeps_a_document_under_its_stored_value(
    make_store, embeddings
) -> None:
    keyed = make_store(partition_key="tenant")
    _claims(keyed, Partitioned)

    async def ingest(tenant: str) -> dict[str, str]:
        doc = Document(DOC, metadata={"document_id": "policy", "tenant": tenant})
        loader = TextLoader(embedding=embeddings)
        await loader.chunk_documents([doc], vector_store=keyed)
        return loader.report.failed

    assert await keyed.stored_row_metadata([]) == {}
    assert await ingest("acme") == {}
    stored = await keyed.stored_row_metadata(["policy", "nope"])
    assert list(stored) == ["policy"] and stored["policy"]["tenant"] == "acme"
    failed = await ingest("globex")
    assert list(failed) == ["policy"] and "stored under tenant 'acme'" in failed["policy"]
    hits = await keyed.similarity_search(QUESTION, limit=20)
    assert hits and {h.metadata["tenant"] for h in hits} == {"acme"}
