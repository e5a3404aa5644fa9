"""A question is checked at the boundary of every Python surface with the rules and words
of the HTTP service, before any model loads or anything connects.

The surfaces run on a store that is not connected and whose embedding model is not loaded
(``SentenceTransformerEmbeddings`` loads lazily): after a refused call both must still be
so. The HTTP bodies are in ``tests/server/test_validation.py``, the CLI in
``tests/cli/test_ask_question.py``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from langchain_core.documents import Document

from parrot_parents import Chatbot, InTableParentSearcher, PgVectorStore
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import ConfigurationError, StoreError
from parrot_parents.retrieval import check_question
from parrot_parents.stores.context import ContextPlan
from parrot_parents.stores.questions import MAX_QUESTION_CHARS, question_problem
from parrot_parents.sync import run_sync
from tests.conftest import unique_table

#: (question, the words every surface reports).
BAD: list[tuple[Any, str]] = [
    ("", "must not be empty"),
    ("  \n\t ", "must not be blank"),
    ("pay\x00day", "must not contain NUL characters"),
    ("pay \ud800", "must not contain lone surrogates"),
    ("\udcff", "must not contain lone surrogates"),
    ("x" * (MAX_QUESTION_CHARS + 1), "must be at most 4000 characters, got 4001"),
    (42, "must be a string, got int"),
    (None, "must be a string, got NoneType"),
]
IDS = ["empty", "blank", "nul", "surrogate", "low-surrogate", "too-long", "int", "none"]


@pytest.mark.parametrize(("question", "words"), BAD, ids=IDS)
def test_the_rules_and_their_words(question: Any, words: str) -> None:
    problem = question_problem(question)
    assert problem is not None and problem.startswith(words)
    with pytest.raises(ConfigurationError) as caught:
        check_question(question)
    assert str(caught.value) == f"question: {problem}"
    assert "\ud800" not in str(caught.value)  # never echoed


@pytest.mark.parametrize(
    "question", ["pay", "a\x01b", "\u200b", "é" * MAX_QUESTION_CHARS, " padded "]
)
def test_good_questions_pass_unchanged(question: str) -> None:
    assert question_problem(question) is None
    assert check_question(question) == question


@pytest.fixture
def fresh(pg_dsn: str) -> PgVectorStore:
    """A store not connected, with a model not loaded yet. Its collection does not exist:
    what the check must come before (opening it) would fail with another error."""
    embedding = SentenceTransformerEmbeddings()
    assert embedding._model is None
    return PgVectorStore(dsn=pg_dsn, table=unique_table("q"), embedding=embedding, create=False)


def _untouched(store: PgVectorStore) -> None:
    assert store.embedding._model is None, "a model was loaded"
    assert store.connections.home_engine is None, "the store connected"


def _surfaces(store: PgVectorStore) -> dict[str, Callable[[Any], Awaitable[Any]]]:
    bot = Chatbot(store=store, parent_searcher=InTableParentSearcher(store=store))
    return {
        "similarity_search": lambda q: store.similarity_search(q),
        "similarity_search lexical": lambda q: store.similarity_search(q, search_mode="lexical"),
        "similarity_search_by_vector hybrid": lambda q: store.similarity_search_by_vector(
            [1.0] * 384, search_mode="hybrid", query=q
        ),
        "search_with_context": lambda q: store.search_with_context(q, ContextPlan()),
        "bot.retrieve": lambda q: bot.retrieve(q),
        "bot.get_vector_context": lambda q: bot.get_vector_context(q, expand_to_parent=True),
        "bot.ask": lambda q: bot.ask(q),  # refused before it looks for an LLM
    }


SURFACES = [
    "similarity_search",
    "similarity_search lexical",
    "similarity_search_by_vector hybrid",
    "search_with_context",
    "bot.retrieve",
    "bot.get_vector_context",
    "bot.ask",
]


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize(("question", "words"), BAD, ids=IDS)
async def test_python_api_refuses_before_any_model_loads(
    fresh: PgVectorStore, surface: str, question: Any, words: str
) -> None:
    if question is None and surface.startswith("similarity_search_by_vector"):
        pytest.skip("there, query=None means a search without text")
    with pytest.raises(ConfigurationError, match="^question: " + re.escape(words)):
        await _surfaces(fresh)[surface](question)
    _untouched(fresh)


@pytest.mark.parametrize(("question", "words"), BAD[:4], ids=IDS[:4])
def test_sync_twins_refuse_before_any_model_loads(
    fresh: PgVectorStore, question: str, words: str
) -> None:
    bot = Chatbot(store=fresh)
    for call in (bot.get_vector_context_sync, bot.retrieve_sync, bot.ask_sync):
        with pytest.raises(ConfigurationError, match="^question: " + re.escape(words)):
            call(question)
    _untouched(fresh)


async def test_a_bad_question_is_an_input_error_and_the_store_goes_on(
    store: PgVectorStore,
) -> None:
    """The reproduction: NUL was a StoreError from the database, a lone surrogate a
    TypeError from the tokenizer."""
    await store.add_documents(
        [Document("Salaries are paid on payday.", metadata={"document_id": "pay"})]
    )
    bot = Chatbot(store=store, owns_store=False)
    for question in ("pay\x00day", "pay \ud800"):
        for search_mode in ("dense", "lexical", "hybrid"):
            with pytest.raises(ConfigurationError) as caught:
                await bot.get_vector_context(question, search_mode=search_mode)
            assert not isinstance(caught.value, StoreError)
    context, _ = await bot.get_vector_context("payday", search_mode="hybrid")
    assert "Salaries" in context


def test_langchain_adapter_refuses_in_the_callers_thread(fresh: PgVectorStore) -> None:
    from parrot_parents.integrations.langchain import ParentChildRetriever

    retriever = ParentChildRetriever(bot=Chatbot(store=fresh))
    for question, words in BAD[:4]:
        with pytest.raises(ConfigurationError, match="^question: " + re.escape(words)):
            retriever.invoke(question)
        with pytest.raises(ConfigurationError, match="^question: " + re.escape(words)):
            run_sync(retriever.ainvoke(question))
    _untouched(fresh)


def test_llamaindex_adapter_refuses_in_the_callers_thread(fresh: PgVectorStore) -> None:
    pytest.importorskip("llama_index.core")
    from parrot_parents.integrations.llamaindex import ParentChildLlamaRetriever

    retriever = ParentChildLlamaRetriever(Chatbot(store=fresh))
    for question, words in BAD[:4]:
        with pytest.raises(ConfigurationError, match="^question: " + re.escape(words)):
            retriever.retrieve(question)
        with pytest.raises(ConfigurationError, match="^question: " + re.escape(words)):
            run_sync(retriever.aretrieve(question))
    _untouched(fresh)
