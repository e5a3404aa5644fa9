"""ParentChildLlamaRetriever in a LlamaIndex query engine (skipped without the extra)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("llama_index.core")

from typing import Any

from llama_index.core.base.llms.types import CompletionResponse
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import MetadataMode, NodeWithScore
from pydantic import Field

from parrot_parents import Chatbot, InTableParentSearcher, PgVectorStore, TextLoader
from parrot_parents.errors import ConfigurationError
from parrot_parents.integrations.llamaindex import ParentChildLlamaRetriever
from parrot_parents.sync import run_sync
from tests.conftest import unique_table
from tests.integrations.conftest import LEAVE, PAY, handbook

QUESTION = "When is overtime paid?"


class PromptRecorder(MockLLM):
    """LlamaIndex's own mock LLM, keeping each prompt it was given (it answers with it)."""

    prompts: list[str] = Field(default_factory=list)

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.prompts.append(prompt)
        return super().complete(prompt, formatted, **kwargs)


async def _store(pg_dsn: str, embeddings) -> PgVectorStore:  # type: ignore[no-untyped-def]
    store = PgVectorStore(dsn=pg_dsn, table=unique_table("li"), embedding=embeddings)
    await TextLoader(embedding=embeddings).chunk_documents(handbook(), vector_store=store)
    return store


def test_query_engine_answers_from_the_parent(pg_dsn: str, embeddings) -> None:
    store = run_sync(_store(pg_dsn, embeddings))
    bot = Chatbot(store=store, parent_searcher=InTableParentSearcher(store=store))
    retriever = ParentChildLlamaRetriever(bot, expand_to_parent=True, limit=2)
    try:
        nodes = retriever.retrieve(QUESTION)
        assert all(isinstance(n, NodeWithScore) for n in nodes)
        top = nodes[0]
        assert top.node.get_content() == PAY and top.node.node_id == f"pay#doc:0-{len(PAY)}"
        assert top.node.metadata["kind"] == "parent" and top.node.metadata["source"] == "pay.md"
        assert (top.node.metadata["start_index"], top.node.metadata["end_index"]) == (0, len(PAY))
        assert isinstance(top.score, float) and top.node.metadata["child_ids"]

        # MockLLM without max_tokens echoes its prompt: the answer shows what it was given.
        engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
        response = engine.query(QUESTION)
        assert "Overtime is paid in the following pay cycle" in str(response)
        assert [n.node.node_id for n in response.source_nodes] == [n.node.node_id for n in nodes]
    finally:
        run_sync(store.drop())
        bot.close_sync()


async def test_async_retrieve_and_query(pg_dsn: str, embeddings) -> None:
    store = await _store(pg_dsn, embeddings)
    bot = Chatbot(store=store, parent_searcher=InTableParentSearcher(store=store))
    retriever = ParentChildLlamaRetriever(
        bot, expand_to_parent=False, limit=1, filter={"source": "leave.md"}
    )
    try:
        (node,) = await retriever.aretrieve("How many vacation days carry over?")
        assert node.node.metadata["kind"] == "child"
        start, end = node.node.metadata["start_index"], node.node.metadata["end_index"]
        assert node.node.get_content() == LEAVE[start:end] and "carry over" in LEAVE[start:end]
        engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
        response = await engine.aquery("How many vacation days carry over?")
        assert "carry over" in str(response) and "Overtime" not in str(response)
    finally:
        await store.drop()
        await bot.close()


def test_a_query_engine_hands_the_llm_no_more_than_the_budget(package_bot: Chatbot) -> None:
    retriever = ParentChildLlamaRetriever(
        package_bot, on_package_loop=True, expand_to_parent=True, budget=2000
    )
    llm = PromptRecorder()
    response = RetrieverQueryEngine.from_args(retriever, llm=llm).query(
        "How many vacation days do I get, and do unused days carry over?"
    )
    nodes = response.source_nodes
    shown = [n.node.get_content(metadata_mode=MetadataMode.LLM) for n in nodes]
    assert len(nodes) >= 2 and sum(len(text) for text in shown) <= 2000
    assert shown == [n.node.get_content() for n in nodes]  # the passage text alone
    (prompt,) = llm.prompts
    assert "\n\n".join(shown) in prompt and "child_ids" not in prompt
    # The metadata stays on the node for the caller.
    assert all(len(n.node.metadata) == 19 and n.node.metadata["kind"] for n in nodes)
    assert nodes[0].node.get_content(metadata_mode=MetadataMode.ALL).startswith("id: ")


def test_metadata_keys_asked_for_are_shown(package_bot: Chatbot) -> None:
    retriever = ParentChildLlamaRetriever(
        package_bot, llm_metadata_keys=["source"], expand_to_parent=True, budget=2000
    )
    (first, *_) = retriever.retrieve("Do unused vacation days carry over?")
    source = first.node.metadata["source"]
    for mode in (MetadataMode.LLM, MetadataMode.EMBED):
        text = first.node.get_content(metadata_mode=mode)
        assert text == f"source: {source}\n\n{first.node.get_content()}"


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ("source", "llm_metadata_keys must be a list of metadata keys, got 'source'"),
        (["sourc"], "llm_metadata_keys: unknown key 'sourc' (known: id, source, "),
        (None, "llm_metadata_keys must be a list of metadata keys, got None"),
    ],
)
def test_unknown_metadata_keys_are_refused(keys: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        ParentChildLlamaRetriever(Chatbot(), llm_metadata_keys=keys)


def test_bad_options_are_refused_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="unknown option 'top_k'"):
        ParentChildLlamaRetriever(Chatbot(), top_k=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="limit"):
        ParentChildLlamaRetriever(Chatbot(), limit=0)  # type: ignore[arg-type]
