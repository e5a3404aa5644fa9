"""A scripted LLM with the interface of the OpenAI-compatible client, and a small corpus."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from langchain_core.documents import Document

from parrot_parents.errors import LLMError
from parrot_parents.llm.client import ChatCompletion, LLMSettings

Reply = str | BaseException
_CHUNK = re.compile(r"<chunk>\n(.*?)\n</chunk>", re.S)
_DOCUMENT = re.compile(r"<document>\n(.*?)\n</document>", re.S)


class ScriptedLLM:
    """``complete`` as :class:`~parrot_parents.llm.client.ChatCompletionsClient` has it.

    ``script(chunk, document)`` gives the reply for a prompt (the text between its
    ``<chunk>`` and ``<document>`` tags, None when absent): a string, or an exception to
    raise. Every call is recorded in ``prompts``.
    """

    def __init__(self, script: Callable[[str | None, str | None], Reply], model: str = "m1"):
        self.settings = LLMSettings(base_url="http://127.0.0.1:9/v1", model=model)
        self.script = script
        self.prompts: list[str] = []

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> ChatCompletion:
        user = messages[-1]["content"]
        self.prompts.append(user)
        chunk, document = _CHUNK.search(user), _DOCUMENT.search(user)
        reply = self.script(chunk and chunk.group(1), document and document.group(1))
        if isinstance(reply, BaseException):
            raise reply
        return ChatCompletion(
            text=reply,
            model=self.settings.model,
            finish_reason="stop",
            usage={"prompt_tokens": len(user) // 4, "completion_tokens": len(reply) // 4},
            latency_ms=0.1,
        )


AGREEMENT = (
    "# Services agreement\n\n"
    "## Termination\n\n"
    "Either party may end this agreement in writing. "
    "The notice period is thirty days.\n\n"
    "## Payment\n\n"
    "Invoices are paid by bank transfer. "
    "Late invoices carry interest of two percent a month.\n\n"
    "## Liability\n\n"
    "Neither party is liable for indirect losses. "
    "The total liability is capped at the fees of one year.\n"
)
RECIPES = (
    "# Bread\n\nMix flour, water, salt and yeast. Let the dough rise for two hours.\n\n"
    "# Soup\n\nSimmer the onions in butter, then add the stock and cook for an hour.\n"
)


@pytest.fixture
def corpus() -> list[Document]:
    return [
        Document(page_content=AGREEMENT, metadata={"document_id": "agreement", "source": "a.md"}),
        Document(page_content=RECIPES, metadata={"document_id": "recipes", "source": "r.md"}),
    ]


def failing(exc: BaseException | None = None) -> BaseException:
    return exc or LLMError("the LLM answered HTTP 500: boom", status=500)


def usage_total(stats: Any) -> int:
    return int(stats.prompt_tokens + stats.completion_tokens)
