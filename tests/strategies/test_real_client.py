"""The guarded path over the real OpenAI-compatible client, against a local server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from parrot_parents.llm.client import ChatCompletionsClient, LLMSettings
from parrot_parents.strategies.build import indexer_for
from parrot_parents.strategies.cache import PromptCache
from parrot_parents.strategies.prompts import contextual_messages, parse_text
from parrot_parents.strategies.spec import parse_strategy
from tests.llm.conftest import ChatServer


@pytest.fixture
async def chat_server(aiohttp_server: Any) -> ChatServer:
    chat = ChatServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat.handle)
    server = await aiohttp_server(app)
    chat.url = str(server.make_url("/v1"))
    return chat


async def test_indexer_for_uses_the_configured_client_and_its_model_override(
    chat_server: ChatServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARROT_PARENTS_LLM_BASE_URL", chat_server.url)
    monkeypatch.setenv("PARROT_PARENTS_LLM_MODEL", "env-model")
    cache = PromptCache(tmp_path / "c.sqlite3")
    indexer = indexer_for(parse_strategy("contextual:model=small-model"), cache=cache)
    assert indexer is not None and indexer.model is not None
    note = await indexer.model.ask(contextual_messages("doc", "chunk"), parse_text)
    assert note is not None and note.startswith("Salaries are paid monthly")
    assert chat_server.requests[-1]["model"] == "small-model"
    stats = indexer.model.stats
    assert (stats.calls, stats.prompt_tokens, stats.completion_tokens) == (1, 10, 5)
    await indexer.close()


async def test_a_server_error_degrades_after_the_retries(
    chat_server: ChatServer, tmp_path: Path
) -> None:
    from parrot_parents.strategies.guarded import GuardedModel

    chat_server.behaviour = "error500"
    client = ChatCompletionsClient(LLMSettings(base_url=chat_server.url, model="m", retries=0))
    model = GuardedModel(client, retries=1, backoff_s=0, owns_client=True)
    assert await model.ask(contextual_messages("doc", "chunk"), parse_text) is None
    assert model.stats.failures == {"error": 1} and len(chat_server.requests) == 2
    await model.close()


def test_free_strategies_need_no_indexer() -> None:
    for spec in ("plain", "parent-document:3", "sentence-window", "hierarchical"):
        assert indexer_for(parse_strategy(spec)) is None
