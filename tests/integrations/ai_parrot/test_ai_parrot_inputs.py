"""What a new user did to the ai-parrot integration that got through: each case is held
now (scopes on ai-parrot's own expansion, ids that collide, options that never applied,
inputs that crashed instead of being refused)."""

from __future__ import annotations

import pytest
from parrot.stores.models import Document as ParrotDocument

from parrot_parents import PgVectorStore
from parrot_parents.errors import ConfigurationError
from parrot_parents.integrations.ai_parrot import (
    ParrotParentsSearcher,
    ParrotParentsStore,
    ingest_documents,
)
from tests.integrations.ai_parrot.conftest import QUESTION, HRBot, documents
from tests.integrations.conftest import LEAVE, PAY


async def test_the_stock_route_expands_within_the_stores_scope(collection: PgVectorStore) -> None:
    every = await ParrotParentsStore(collection).similarity_search(QUESTION, limit=1)
    pay_parent = every[0].metadata["parent_document_id"]
    assert await ParrotParentsSearcher(collection).fetch([pay_parent])  # it exists
    scoped = ParrotParentsStore(collection, scope={"department": "people"})
    assert await ParrotParentsSearcher(scoped).fetch([pay_parent]) == {}


async def test_two_documents_of_one_id_are_refused_before_anything_is_written(
    collection: PgVectorStore,
) -> None:
    before = await collection.count()
    twins = [
        ParrotDocument(
            page_content=PAY, metadata={"source": "intro.md", "filename": "/a/intro.md"}
        ),
        ParrotDocument(
            page_content=LEAVE, metadata={"source": "intro.md", "filename": "/b/intro.md"}
        ),
    ]
    with pytest.raises(ConfigurationError, match=r"documents\[0\] and documents\[1\]"):
        await ingest_documents(twins, collection)
    assert await collection.count() == before


async def test_a_blank_document_is_named_not_stored(collection: PgVectorStore) -> None:
    report = await ingest_documents(
        [ParrotDocument(page_content="  \n", metadata={"source": "empty.md"})], collection
    )
    assert report.warnings["empty.md"] == ["empty document skipped"]
    assert "empty.md" not in await collection.document_sources(["empty.md"])


async def test_bad_loader_options_and_delete_inputs_are_clear_errors(
    collection: PgVectorStore,
) -> None:
    with pytest.raises(ConfigurationError, match="loader option"):
        await ingest_documents(documents(), collection, child_chunk_sise=3)
    store = ParrotParentsStore(collection)
    with pytest.raises(ConfigurationError, match="non-empty strings"):
        await store.delete_documents(values=[123])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="document id or a list"):
        await store.delete_documents(values=123)  # type: ignore[arg-type]
    # The documents just ingested name themselves as ingest named them.
    assert await store.delete_documents(documents=documents()[1:]) > 0
    assert await store.similarity_search("vacation days", limit=10)
    assert all(
        r.metadata["document_id"] == "pay.md"
        for r in await store.similarity_search("vacation days", limit=10)
    )


async def test_an_over_fetch_past_the_most_is_served_at_the_most(
    collection: PgVectorStore,
) -> None:
    store = ParrotParentsStore(collection)
    results = await store.similarity_search(QUESTION, limit=120)
    assert 0 < len(results) <= 100
    with pytest.raises(ConfigurationError, match="not served"):
        await store.mmr_search(QUESTION, k=3)


def test_options_that_could_never_apply_are_refused(collection: PgVectorStore) -> None:
    with pytest.raises(ConfigurationError, match="not search options"):
        ParrotParentsStore(collection, options={"budget": 200})
    with pytest.raises(ConfigurationError, match="ai-parrot's own"):
        HRBot(
            name="hr",
            llm="openai",
            parrot_parents_store=collection,
            parrot_parents_options={"limit": 3},
        )
    with pytest.raises(ConfigurationError, match="PgVectorStore or a ParrotParentsStore"):
        HRBot(name="hr", llm="openai", parrot_parents_store="documents")


async def test_k_and_limit_that_differ_are_refused_by_the_mixin(
    collection: PgVectorStore,
) -> None:
    bot = HRBot(name="hr", llm="openai", parrot_parents_store=collection)
    with pytest.raises(ConfigurationError, match="differ"):
        await bot.get_vector_context(QUESTION, search_kwargs={"k": 3, "limit": 5})
    _, meta = await bot.get_vector_context(QUESTION, search_kwargs={"k": 2})
    assert meta["parrot_parents"]["limit"] == 2
