"""A collection dropped under a store that has it open: every read and write of that store
then raises :class:`CollectionNotFoundError` naming the collection, never an outage."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langchain_core.documents import Document

from parrot_parents.errors import CollectionNotFoundError
from parrot_parents.loaders.hierarchy import LateChunkingProcessor
from parrot_parents.stores.context import ContextPlan
from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import unique_table

Call = Callable[[PgVectorStore, list[float]], Awaitable[Any]]

#: Every kind of read and write a held store makes: the read pool (unfiltered and filtered
#: searches, a search joined to its context, the context of rows already found), the
#: engine (fetches, the documents table, counts) and writes.
CALLS: dict[str, Call] = {
    "search": lambda s, v: s.similarity_search("leave days"),
    "filtered search": lambda s, v: s.similarity_search_by_vector(
        v, filter={"document_id": "manual"}
    ),
    "lexical search": lambda s, v: s.similarity_search("leave", search_mode="lexical"),
    "search_with_context": lambda s, v: s.search_with_context(
        "leave", ContextPlan(parents=True, window=1), vector=v
    ),
    "fetch_context": lambda s, v: s.fetch_context([("x", {})], ContextPlan(parents=True)),
    "fetch_children": lambda s, v: s.fetch_children(["p"]),
    "fetch_chunk_ranges": lambda s, v: s.fetch_chunk_ranges([("manual", 0, 3)]),
    "document_rows": lambda s, v: s.document_rows("manual"),
    "ingestion_records": lambda s, v: s.ingestion_records(),
    "document_states": lambda s, v: s.document_states(["manual"]),
    "count": lambda s, v: s.count(),
    "delete": lambda s, v: s.delete("manual"),
    "write": lambda s, v: s.add_documents(
        [Document(page_content="x", metadata={"is_chunk": True})], embeddings=[v]
    ),
}


@pytest.fixture
async def held(pg_dsn: str, embeddings: Any) -> Any:
    """A store that has read its collection, then a second store object dropped it."""
    table = unique_table("dropped")
    store = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings)
    proc = LateChunkingProcessor(child_chunk_size=40, embedding=embeddings)
    docs = proc.build_hierarchy("Paid leave is twenty days. " * 8, "manual").documents()
    await store.add_documents(docs)
    vector = await embeddings.aembed_query("leave days")
    for call in CALLS.values():  # every path has run once: statements and pools are warm
        if call is not CALLS["delete"]:
            await call(store, vector)
    other = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings, create=False)
    await other.drop()
    await other.close()
    try:
        yield store, vector
    finally:
        await store.close()


async def test_every_path_of_a_store_whose_collection_was_dropped_names_the_collection(
    held: Any,
) -> None:
    store, vector = held
    for name, call in CALLS.items():
        with pytest.raises(CollectionNotFoundError) as info:
            await call(store, vector)
        err = info.value
        assert not err.unavailable, name
        assert store.qualified_name in err.message, (name, err.message)
        assert "SELECT" not in str(err), name
