"""ParentChildRetriever in LangChain runnables, on a real PostgreSQL and the real model."""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough

from parrot_parents import Chatbot, InTableParentSearcher, PgVectorStore, TextLoader
from parrot_parents.bots.repository import BotRepository
from parrot_parents.errors import ConfigurationError
from parrot_parents.integrations.langchain import ParentChildRetriever
from parrot_parents.integrations.llamaindex import ParentChildLlamaRetriever
from parrot_parents.sync import run_sync
from tests.conftest import unique_table
from tests.integrations.conftest import PAY, handbook
from tests.migrations.support import (  # noqa: F401
    COLLECTION,
    bots_dsn_fixture,
    template_dsn_fixture,
)

QUESTION = "When is overtime paid?"
KEYS = {"id", "source", "document_id", "start_index", "end_index", "kind", "score", "rank"}


class PromptRecorder(BaseCallbackHandler):
    """Keeps the messages each chat model call received."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.prompts.extend(m.content for batch in messages for m in batch)


def _chain(retriever: ParentChildRetriever) -> Any:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer from the context.\n{context}"), ("human", "{question}")]
    )

    def join(docs: list[Document]) -> str:
        return "\n\n".join(f"[{d.metadata['source']}] {d.page_content}" for d in docs)

    model = FakeListChatModel(responses=["In the following pay cycle."])
    return (
        {"context": retriever | join, "question": RunnablePassthrough()}
        | prompt
        | model
        | StrOutputParser()
    )


async def _store(pg_dsn: str, embeddings: Any) -> PgVectorStore:
    store = PgVectorStore(dsn=pg_dsn, table=unique_table("lc"), embedding=embeddings)
    await TextLoader(embedding=embeddings).chunk_documents(handbook(), vector_store=store)
    return store


def test_sync_invoke_in_a_chain_hands_the_parent_to_the_model(pg_dsn: str, embeddings) -> None:
    store = run_sync(_store(pg_dsn, embeddings))  # the package's loop: invoke's path
    bot = Chatbot(store=store, parent_searcher=InTableParentSearcher(store=store))
    retriever = ParentChildRetriever(bot=bot, expand_to_parent=True, limit=2)
    try:
        docs = retriever.invoke(QUESTION)
        assert docs and docs[0].page_content == PAY and docs[0].metadata["kind"] == "parent"
        meta = docs[0].metadata
        assert set(meta) >= KEYS and meta["source"] == "pay.md"
        assert (meta["start_index"], meta["end_index"]) == (0, len(PAY))
        assert meta["child_ids"] and all(c.startswith("pay#c:") for c in meta["child_ids"])
        assert isinstance(meta["score"], float)

        # per-call options override the retriever's own
        children = retriever.invoke(QUESTION, expand_to_parent=False, limit=1)
        assert [d.metadata["kind"] for d in children] == ["child"]
        assert "Overtime" in children[0].page_content and children[0].id in meta["child_ids"]
        assert (
            retriever.invoke(QUESTION, filter={"source": "leave.md"})[0].metadata["document_id"]
            == "leave"
        )
        with pytest.raises(ConfigurationError, match="unknown option 'top_k'"):
            retriever.invoke(QUESTION, top_k=3)

        recorder = PromptRecorder()
        answer = _chain(retriever).invoke(QUESTION, config={"callbacks": [recorder]})
        assert answer == "In the following pay cycle."
        system, human = recorder.prompts
        assert PAY in system and "[pay.md]" in system and human == QUESTION
    finally:
        run_sync(store.drop())
        bot.close_sync()


async def test_async_invoke_awaits_the_bot_on_the_callers_loop(pg_dsn: str, embeddings) -> None:
    store = await _store(pg_dsn, embeddings)  # this loop: ainvoke's path
    bot = Chatbot(store=store, parent_searcher=InTableParentSearcher(store=store))
    retriever = ParentChildRetriever(bot=bot, expand_to_parent=True, mode="window:1", limit=1)
    try:
        docs = await retriever.ainvoke(QUESTION)
        assert [d.metadata["kind"] for d in docs] == ["window"]
        text = docs[0].page_content
        assert text == PAY[docs[0].metadata["start_index"] : docs[0].metadata["end_index"]]
        budgeted = await retriever.ainvoke(QUESTION, mode="parent", budget=120)
        assert sum(len(d.page_content) for d in budgeted) <= 120

        recorder = PromptRecorder()
        answer = await _chain(retriever).ainvoke(QUESTION, config={"callbacks": [recorder]})
        assert answer == "In the following pay cycle." and "Overtime" in recorder.prompts[0]
    finally:
        await store.drop()
        await bot.close()


async def test_from_bot_builds_from_a_bot_row(bots_dsn: str, embeddings) -> None:
    async with BotRepository(bots_dsn) as repo:
        await repo.create({"name": "hr", "collection": COLLECTION, "context_search_limit": 2})
    expected = await Chatbot.from_database("hr", dsn=bots_dsn, embedding=embeddings)
    try:
        want = [p.id for p in (await expected.retrieve(QUESTION, expand_to_parent=True)).passages]
    finally:
        await expected.close()

    sync_retriever = ParentChildRetriever.from_bot(
        "hr", dsn=bots_dsn, embedding=embeddings, expand_to_parent=True
    )
    try:
        assert [d.id for d in sync_retriever.invoke(QUESTION)] == want
        # a from_bot retriever also serves ainvoke, awaiting on the package's loop
        assert [d.id for d in await sync_retriever.ainvoke(QUESTION)] == want
    finally:
        sync_retriever.close()

    async_retriever = await ParentChildRetriever.afrom_bot(
        "hr", dsn=bots_dsn, embedding=embeddings, expand_to_parent=True
    )
    try:
        assert [d.id for d in await async_retriever.ainvoke(QUESTION)] == want
    finally:
        await async_retriever.aclose()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"budget": -1}, "budget must be a positive int"),
        ({"budjet": 2000}, "unknown option 'budjet'"),
        ({"budjet": None}, "unknown option 'budjet'"),
        ({"scope": None}, "unknown option 'scope'"),
        ({"options": {"limit": 0}}, "limit must be a positive int"),
        ({"options": {"top_k": 3}}, "unknown option 'top_k'"),
        ({"mode": "windw:1"}, "mode 'windw:1'"),
    ],
)
def test_a_bad_option_is_refused_at_construction_as_by_the_llamaindex_adapter(
    options: dict[str, Any], message: str
) -> None:
    # The same error and words as the other surfaces: not pydantic's ValidationError around
    # them, and never a misspelt option dropped without a word.
    flat = options.get("options", options)
    with pytest.raises(ConfigurationError, match=re.escape(message)) as langchain:
        ParentChildRetriever(bot=Chatbot(), **options)
    with pytest.raises(ConfigurationError) as llama:
        ParentChildLlamaRetriever(Chatbot(), **flat)
    assert type(langchain.value) is type(llama.value)
    assert str(langchain.value) == str(llama.value)


def test_options_given_both_ways_are_merged_the_keywords_winning() -> None:
    retriever = ParentChildRetriever(
        bot=Chatbot(), options={"budget": 1000, "limit": 3}, budget=2000, tags=["kept"]
    )
    assert retriever.options.set_fields() == {"budget": 2000, "limit": 3}
    assert retriever.tags == ["kept"]
    validated = ParentChildRetriever.model_validate({"bot": Chatbot(), "budget": 500})
    assert validated.options.set_fields() == {"budget": 500}
