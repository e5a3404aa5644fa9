"""parrot-parents inside the real ai-parrot package: its registry, its stock bot with our
store and parent searcher, our mixin, its reranker, and moving its documents in."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from parrot.bots import BasicBot
from parrot.exceptions import ConfigError
from parrot.models.bots import BotModel
from parrot.rerankers import LocalCrossEncoderReranker
from parrot.stores.models import Document as ParrotDocument
from parrot.stores.models import SearchResult
from parrot.stores.parents.factory import create_parent_searcher

from parrot_parents import PgVectorStore
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import CollectionNotFoundError, ConfigurationError
from parrot_parents.integrations.ai_parrot import (
    ParrotParentsSearcher,
    ParrotParentsStore,
    ingest_documents,
)
from parrot_parents.rerankers.testing import build_tiny_cross_encoder
from tests.conftest import fresh_store, unique_table
from tests.integrations.ai_parrot.conftest import QUESTION, HRBot, documents
from tests.integrations.conftest import PAY


def stock_bot(store: ParrotParentsStore, **kwargs: object) -> BasicBot:
    bot = BasicBot(name="stock", llm="openai", context_score_threshold=0.0, **kwargs)
    bot.store = store
    return bot


async def test_the_registry_type_resolves_through_ai_parrots_factory(
    collection: PgVectorStore,
) -> None:
    store = ParrotParentsStore(collection)
    searcher = create_parent_searcher({"type": "parrot_parents"}, store=store)
    assert isinstance(searcher, ParrotParentsSearcher)
    assert await searcher.health_check()
    with pytest.raises(ConfigError, match="unknown key"):
        create_parent_searcher({"type": "parrot_parents", "colection": "x"}, store=store)
    with pytest.raises(ConfigError, match="parrot-parents collection"):
        create_parent_searcher({"type": "parrot_parents"}, store=object())


async def test_a_bot_row_config_resolves_store_and_searcher_through_ai_parrot(
    collection: PgVectorStore, pg_dsn: str
) -> None:
    row = BotModel(
        name="hr",
        use_vector=True,
        vector_store_config={"name": "parrot_parents", "table": collection.table, "dsn": pg_dsn},
        parent_searcher_config={"type": "parrot_parents", "expand_to_parent": True},
        context_score_threshold=0.0,
    )
    bot = BasicBot(expand_to_parent=True, **row.to_bot_config())
    bot.configure_store()  # ai-parrot's own resolution of vector_store_config
    assert isinstance(bot.store, ParrotParentsStore)
    bot.parent_searcher = create_parent_searcher(row.parent_searcher_config, store=bot.store)
    try:
        context, meta = await bot.get_vector_context(QUESTION, limit=3)
        assert "error" not in meta, meta
        # Both children of the pay document fold into it: the whole text, once.
        assert context.startswith(PAY) and context.count("direct deposit") == 1
    finally:
        await bot.store.disconnect()


async def test_the_stock_bot_expands_per_bot_and_per_call(collection: PgVectorStore) -> None:
    store = ParrotParentsStore(collection)
    searcher = ParrotParentsSearcher(store)
    on = stock_bot(store, expand_to_parent=True, parent_searcher=searcher)
    context, _ = await on.get_vector_context(QUESTION, limit=2)
    assert PAY in context
    context, _ = await on.get_vector_context(QUESTION, limit=2, expand_to_parent=False)
    assert PAY not in context and "twice a month" in context
    off = stock_bot(store, parent_searcher=searcher)
    context, _ = await off.get_vector_context(QUESTION, limit=2)
    assert PAY not in context
    context, _ = await off.get_vector_context(QUESTION, limit=2, expand_to_parent=True)
    assert PAY in context


async def test_the_mixin_runs_the_pipeline_and_honours_ai_parrots_parameters(
    collection: PgVectorStore,
) -> None:
    bot = HRBot(name="hr", llm="openai", expand_to_parent=True, parrot_parents_store=collection)
    context, meta = await bot.get_vector_context(QUESTION, limit=4, return_sources=True)
    inner = meta["parrot_parents"]
    assert context.startswith(PAY) and inner["expanded"] and inner["limit"] == 4
    assert meta["search_results_count"] == inner["passages"] == 1
    assert meta["source_documents"] and meta["context_sources"]
    context, meta = await bot.get_vector_context(QUESTION, limit=1, expand_to_parent=False)
    assert len(meta["parrot_parents"]["children"]) == 1 and PAY not in context
    context, meta = await bot.get_vector_context(
        QUESTION, search_kwargs={"budget": 120, "trim": False}
    )
    assert len(context) <= 120


async def test_a_scope_and_a_filter_hold_on_both_routes(collection: PgVectorStore) -> None:
    scoped = ParrotParentsStore(collection, scope={"department": "people"})
    results = await scoped.similarity_search(QUESTION, limit=5)
    assert results and all(r.metadata["department"] == "people" for r in results)
    bot = HRBot(name="hr", llm="openai", expand_to_parent=True, parrot_parents_store=collection)
    context, _ = await bot.get_vector_context(
        QUESTION, search_kwargs={"metadata_filters": {"department": "people"}}
    )
    assert context and "salar" not in context.lower()
    with pytest.raises(ConfigurationError, match="unknown"):
        await scoped.similarity_search(QUESTION, nope=1)


async def test_score_threshold_is_a_minimum_cosine_similarity(collection: PgVectorStore) -> None:
    store = ParrotParentsStore(collection, options={"search_mode": "dense"})
    every = await store.similarity_search(QUESTION, limit=10)
    similarities = sorted(r.metadata["dense_score"] for r in every)
    bound = similarities[len(similarities) // 2]
    kept = await store.similarity_search(QUESTION, limit=10, score_threshold=bound)
    assert kept and all(r.metadata["dense_score"] >= bound for r in kept)
    assert len(kept) < len(every)
    assert all(isinstance(r, SearchResult) for r in kept)


async def test_ai_parrots_reranker_reorders_the_children_before_expansion(
    collection: PgVectorStore, tmp_path: Path
) -> None:
    model = build_tiny_cross_encoder(tmp_path / "ce", seed=3)
    reranker = LocalCrossEncoderReranker(
        model_name=str(model), device="cpu", precision="fp32", warmup=False
    )
    bot = HRBot(
        name="hr",
        llm="openai",
        reranker=reranker,
        expand_to_parent=False,
        parrot_parents_store=collection,
    )
    _, meta = await bot.get_vector_context(QUESTION, limit=2)
    inner = meta["parrot_parents"]
    assert inner["reranked"] is True and inner["candidates"] > 2
    scores = [c["rerank_score"] for c in inner["children"]]
    assert len(scores) == 2 and scores == sorted(scores, reverse=True)


async def test_a_missing_parent_keeps_its_children_and_says_so(
    collection: PgVectorStore,
) -> None:
    bot = HRBot(name="hr", llm="openai", expand_to_parent=True, parrot_parents_store=collection)
    _, meta = await bot.get_vector_context(QUESTION, limit=2)
    parent = meta["parrot_parents"]["parents"][0]
    engine, table = await collection.ready()
    async with engine.begin() as conn:
        await conn.execute(table.delete().where(table.c.id == parent))
    searcher = ParrotParentsSearcher(collection)
    assert await searcher.fetch([parent, "no-such-parent"]) == {}
    context, meta = await bot.get_vector_context(QUESTION, limit=2)
    inner = meta["parrot_parents"]
    assert inner["missing_parents"] == [parent] and "twice a month" in context
    assert any(f["stage"] == "parent_fetch" for f in inner["fallbacks"])


async def test_a_dropped_collection_raises_a_clear_error(
    pg_dsn: str, embeddings: SentenceTransformerEmbeddings
) -> None:
    table = unique_table()
    async with fresh_store(pg_dsn, embeddings) as store:
        await ingest_documents(documents()[:1], store)
        table = store.table
    reader = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings, create=False)
    bot = HRBot(name="hr", llm="openai", parrot_parents_store=reader)
    with pytest.raises(CollectionNotFoundError, match=table):
        await bot.get_vector_context(QUESTION)
    await reader.close()


async def test_an_ai_parrot_document_round_trips_with_its_metadata(
    collection: PgVectorStore,
) -> None:
    store = ParrotParentsStore(collection)
    hit = (await store.similarity_search(QUESTION, limit=1))[0]
    assert hit.metadata["department"] == "hr" and hit.metadata["document_id"] == "pay.md"
    start, end = hit.metadata["start_index"], hit.metadata["end_index"]
    assert PAY[start:end] == hit.content
    parents = await ParrotParentsSearcher(store).fetch([hit.metadata["parent_document_id"]])
    (parent,) = parents.values()
    assert isinstance(parent, ParrotDocument)
    assert parent.page_content == PAY and parent.metadata["source"] == "pay.md"
    with pytest.raises(ConfigurationError, match="hierarchy key"):
        await ingest_documents(
            [ParrotDocument(page_content="x", metadata={"is_chunk": True})], collection
        )


def test_without_ai_parrot_the_error_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['parrot'] = None\n"
        "try:\n    import parrot_parents.integrations.ai_parrot\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "pip install 'parrot-parents[ai-parrot]'" in out
