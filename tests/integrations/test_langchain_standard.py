"""LangChain's standard retriever suite (langchain-tests) over ParentChildRetriever.

Run over the shared ingest of the example corpus (a real PostgreSQL and the real model),
once per way the retriever hands back passages: the children themselves, their parents,
windows around them, merged children, parents packed into a budget, and parents found by
the dense and by the lexical search alone. ``k`` (the suite's number of results) is the
number of Documents after expansion and packing in each of them.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain_tests")

from langchain_tests.integration_tests import RetrieversIntegrationTests

from parrot_parents import Chatbot
from parrot_parents.errors import ConfigurationError
from parrot_parents.integrations.langchain import ParentChildRetriever

QUESTION = "How many vacation days do I get, and do unused days carry over?"

#: The retriever's options in each run of the suite.
SHAPES: dict[str, dict[str, Any]] = {
    "children": {"expand_to_parent": False},
    "parents": {"expand_to_parent": True},
    "windows": {"expand_to_parent": True, "mode": "window:1"},
    "auto_merge": {"expand_to_parent": True, "mode": "auto_merge:0.5"},
    # A budget that holds 3 passages of this corpus: the suite asks for exactly k, and a
    # smaller budget rightly returns fewer (test_k_caps_what_a_budget_packed).
    "budget": {"expand_to_parent": True, "budget": 4000},
    "dense": {"expand_to_parent": True, "search_mode": "dense"},
    "lexical": {"expand_to_parent": True, "search_mode": "lexical"},
}


class TestParentChildRetrieverStandard(RetrieversIntegrationTests):
    options: dict[str, Any]
    bot: Chatbot

    @pytest.fixture(autouse=True, params=list(SHAPES))
    def _shape(self, request: pytest.FixtureRequest, package_bot: Chatbot) -> None:
        # The suite reads its constructor's arguments from properties, not fixtures.
        self.bot = package_bot
        self.options = SHAPES[request.param]

    @property
    def retriever_constructor(self) -> type[ParentChildRetriever]:
        return ParentChildRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"bot": self.bot, "on_package_loop": True, **self.options}

    @property
    def retriever_query_example(self) -> str:
        return QUESTION


def test_k_searches_deeper_when_children_fold_into_fewer_parents(package_bot: Chatbot) -> None:
    retriever = ParentChildRetriever(bot=package_bot, expand_to_parent=True)
    # The 10 children a search keeps by default lie in 2 sections of this corpus.
    assert len(retriever.invoke(QUESTION, limit=10)) == 2
    docs = retriever.invoke(QUESTION, k=3)
    assert len(docs) == 3 and all(d.metadata["kind"] != "child" for d in docs)
    # A limit the caller set is searched as given: k only caps what it found.
    assert len(retriever.invoke(QUESTION, limit=10, k=3)) == 2
    assert len(ParentChildRetriever(bot=package_bot, limit=10, k=3).invoke(QUESTION)) == 3
    assert len(retriever.invoke(QUESTION, limit=5, k=1)) == 1


def test_k_of_the_call_wins_over_the_retrievers(package_bot: Chatbot) -> None:
    retriever = ParentChildRetriever(bot=package_bot, k=2)
    assert retriever.k == 2 and "k" not in retriever.options.set_fields()
    assert len(retriever.invoke(QUESTION)) == 2
    assert len(retriever.invoke(QUESTION, k=4)) == 4
    assert len(retriever.invoke(QUESTION, k=None)) == 2  # None: the retriever's
    assert len(ParentChildRetriever(bot=package_bot).invoke(QUESTION)) == 10  # no k: all


async def test_k_caps_what_a_budget_packed(package_bot: Chatbot) -> None:
    retriever = ParentChildRetriever(
        bot=package_bot, on_package_loop=True, expand_to_parent=True, budget=2000
    )
    packed = await retriever.ainvoke(QUESTION)
    # 2000 characters hold 2 packed spans here: k=3 cannot add a third.
    assert len(packed) == 2 and sum(len(d.page_content) for d in packed) <= 2000
    assert [d.id for d in await retriever.ainvoke(QUESTION, k=3)] == [d.id for d in packed]
    assert [d.id for d in await retriever.ainvoke(QUESTION, k=1)] == [packed[0].id]


@pytest.mark.parametrize("k", [0, -1, 101, True, False, 2.0, "3"])
def test_a_bad_k_is_refused_naming_k(package_bot: Chatbot, k: Any) -> None:
    message = r"k must be a positive int \(at most 100\), got "
    with pytest.raises(ConfigurationError, match="^" + message):
        ParentChildRetriever(bot=package_bot, k=k)
    with pytest.raises(ConfigurationError, match="^" + message):
        ParentChildRetriever(bot=package_bot).invoke(QUESTION, k=k)
    # model_validate: pydantic wraps a validator's error, as it does a bad option's.
    with pytest.raises(ValueError, match=message):
        ParentChildRetriever.model_validate({"bot": package_bot, "k": k})
