from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from langchain_core.documents import Document

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import ConfigurationError
from parrot_parents.loaders import TextLoader
from parrot_parents.stores.parents import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import unique_table
from tests.stores.tiny_embedder import build_tiny_embedder

HANDBOOK = (
    "Pay schedule. Staff are paid twice a month, on the 15th and on the last business day.\n\n"
    "Direct deposit. Wages go to the bank account named on the deposit form.\n\n"
    "Pay stubs. Every payment has a pay stub in the staff portal.\n\n"
    + "Filler about the canteen, its menus and its opening hours. "
    * 30
)
GARDEN = "Tomatoes need full sun and regular watering in summer. " * 10


async def _ingest(store: PgVectorStore, embeddings) -> None:
    docs = [
        Document(page_content=HANDBOOK, metadata={"document_id": "handbook.md"}),
        Document(page_content=GARDEN, metadata={"document_id": "garden.md"}),
    ]
    await TextLoader(child_chunk_size=120, embedding=embeddings)._chunk_with_late_chunking(
        docs, vector_store=store
    )


async def test_expansion_returns_each_parent_once_at_best_child_rank(
    store: PgVectorStore, embeddings
) -> None:
    await _ingest(store, embeddings)
    bot = Chatbot(
        store=store,
        parent_searcher=InTableParentSearcher(store=store),
        expand_to_parent=True,
        context_search_limit=6,
    )
    ctx, meta = await bot.get_vector_context("When and how am I paid?")
    assert meta["expanded"] is True
    assert meta["parents"][0] == f"handbook.md#doc:0-{len(HANDBOOK)}"
    assert len(meta["parents"]) == len(set(meta["parents"]))
    folded = sum(len(v) for v in meta["folded"].values())
    assert folded == len(meta["children"]) == 6
    assert "Pay schedule" in ctx and "Direct deposit" in ctx
    assert ctx.startswith("[1] handbook.md")
    sizes = {
        f"handbook.md#doc:0-{len(HANDBOOK)}": len(HANDBOOK),
        f"garden.md#doc:0-{len(GARDEN)}": len(GARDEN),
    }
    assert meta["context_chars"] == sum(sizes[p] for p in meta["parents"])
    assert set(meta["timings_ms"]) >= {"search", "expand", "total"}
    assert all(c["score"] is not None for c in meta["children"])


async def test_resolution_order_of_expand_to_parent(store: PgVectorStore, embeddings) -> None:
    await _ingest(store, embeddings)
    searcher = InTableParentSearcher(store=store)
    on = Chatbot(
        store=store, parent_searcher=searcher, expand_to_parent=True, context_search_limit=3
    )
    off = Chatbot(store=store, parent_searcher=searcher, context_search_limit=3)
    assert (await on.get_vector_context("pay stubs"))[1]["expanded"] is True
    assert (await on.get_vector_context("pay stubs", expand_to_parent=False))[1][
        "expanded"
    ] is False
    assert (await off.get_vector_context("pay stubs"))[1]["expanded"] is False
    assert (await off.get_vector_context("pay stubs", expand_to_parent=True))[1]["expanded"] is True


async def test_expansion_without_searcher_is_a_clear_error(store: PgVectorStore) -> None:
    with pytest.raises(ConfigurationError, match="needs a parent searcher"):
        Chatbot(store=store, expand_to_parent=True)
    bot = Chatbot(store=store)
    with pytest.raises(ConfigurationError, match="needs a parent searcher"):
        await bot.get_vector_context("x", expand_to_parent=True)


async def test_missing_parent_keeps_all_children(store: PgVectorStore) -> None:
    await store.add_documents(
        [
            Document(
                page_content=f"Orphan fact number {i} about pay.",
                metadata={
                    "document_id": "o",
                    "parent_document_id": "o#doc:0-999",
                    "start_index": i * 40,
                    "end_index": i * 40 + 30,
                },
            )
            for i in range(3)
        ]
    )
    bot = Chatbot(
        store=store,
        parent_searcher=InTableParentSearcher(store=store),
        expand_to_parent=True,
        context_search_limit=3,
    )
    retrieval = await bot.retrieve("pay")
    assert [p.kind for p in retrieval.passages] == ["child"] * 3
    assert retrieval.meta["missing_parents"] == ["o#doc:0-999"]
    assert retrieval.meta["fallbacks"][0]["stage"] == "parent_fetch"


async def test_fetch_failure_degrades_to_children(
    store: PgVectorStore, embeddings, pg_dsn: str
) -> None:
    await _ingest(store, embeddings)
    broken = PgVectorStore(dsn=pg_dsn, table=unique_table("gone"), embedding=embeddings)
    await broken.connect()
    await broken.drop()  # a real database error: the searcher's table no longer exists
    try:
        bot = Chatbot(
            store=store,
            parent_searcher=InTableParentSearcher(store=broken),
            expand_to_parent=True,
            context_search_limit=4,
        )
        retrieval = await bot.retrieve("pay schedule")
    finally:
        await broken.close()
    assert len(retrieval.passages) == 4
    assert all(p.kind == "child" for p in retrieval.passages)
    assert retrieval.meta["expanded"] is False
    fallback = retrieval.meta["fallbacks"][0]
    # The searcher's read reports the store's error (no SQL text): the collection is gone.
    assert fallback["stage"] == "parent_fetch" and "does not exist" in fallback["error"]


async def test_only_a_searcher_given_uses_its_store(store: PgVectorStore, embeddings) -> None:
    await _ingest(store, embeddings)
    bot = Chatbot(
        parent_searcher=InTableParentSearcher(store=store),
        expand_to_parent=True,
        context_search_limit=2,
    )
    assert bot.store is store
    ctx, _ = await bot.get_vector_context("tomatoes")
    assert "Tomatoes" in ctx


@pytest.mark.parametrize("bad", [0, -3, True, 2.5])
def test_bad_limit(store: PgVectorStore, bad: object) -> None:
    with pytest.raises(ConfigurationError, match="context_search_limit must be a positive int"):
        Chatbot(store=store, context_search_limit=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, True])
def test_a_setting_changed_after_use_is_validated_again(store: PgVectorStore, bad: object) -> None:
    """The bot's validated options are reused between calls, but not after a change: a
    limit of 1 validated once must not let ``True`` (== 1) through."""
    bot = Chatbot(store=store, context_search_limit=1)
    assert bot.options.limit == 1
    bot.context_search_limit = bad  # type: ignore[assignment]
    with pytest.raises(ConfigurationError, match="context_search_limit must be a positive int"):
        bot.options  # noqa: B018 - the property validates
    bot.context_search_limit = 3
    assert bot.options.limit == 3


async def test_the_call_that_loads_the_model_says_so_in_its_timings(
    pg_dsn: str, tmp_path: Path
) -> None:
    made = build_tiny_embedder(tmp_path / "made")
    table = unique_table("load")
    writer = PgVectorStore(
        dsn=pg_dsn, table=table, embedding=SentenceTransformerEmbeddings(str(made))
    )
    try:
        await TextLoader(embedding=writer.embedding, late_chunking=False).chunk_documents(
            [Document(page_content=HANDBOOK, metadata={"document_id": "handbook.md"})],
            vector_store=writer,
        )
        # The same weights at a path this process has not loaded: a new process's load.
        fresh = SentenceTransformerEmbeddings(str(shutil.copytree(made, tmp_path / "copy")))
        reader = PgVectorStore(dsn=pg_dsn, table=table, embedding=fresh)
        try:
            bot = Chatbot(store=reader)
            lexical = await bot.retrieve("When are staff paid?", search_mode="lexical")
            assert "model_load" not in lexical.meta.timings_ms  # nothing embedded
            assert fresh.load_ms is None
            first = await bot.retrieve("When are staff paid?")
            assert fresh.load_ms is not None and fresh.load_ms > 0
            assert first.meta.timings_ms["model_load"] == fresh.load_ms
            assert first.meta.to_dict()["timings_ms"]["model_load"] == fresh.load_ms
            assert first.meta.timings_ms["search"] >= fresh.load_ms  # the stage that waited
            again = await bot.retrieve("When are staff paid?")
            assert "model_load" not in again.meta.timings_ms
        finally:
            await reader.close()
    finally:
        await writer.drop()
        await writer.close()
