"""Fixtures of the LLM client tests: a local server speaking the chat-completions protocol."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from parrot_parents.llm.client import ChatCompletionsClient, LLMSettings


class ChatServer:
    """A local server speaking the chat-completions protocol; records what it received.

    ``behaviour`` is ``ok``, ``error500``, ``flaky503`` (one 503, then ok), ``slow`` or
    ``garbage`` (a 200 that is not a completion).
    """

    def __init__(self) -> None:
        self.behaviour = "ok"
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        if self.behaviour == "error500":
            return web.json_response({"error": {"message": "model exploded"}}, status=500)
        if self.behaviour == "flaky503" and len(self.requests) == 1:
            return web.json_response({"error": {"message": "busy"}}, status=503)
        if self.behaviour == "slow":
            await asyncio.sleep(5)
        if self.behaviour == "garbage":
            return web.json_response({"hello": "world"})
        user = body["messages"][-1]["content"]
        answer = f"Salaries are paid monthly [1]. ({user.count('<passage ')} passages)"
        return web.Response(
            text=json.dumps(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": answer},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                }
            ),
            content_type="application/json",
        )


@pytest.fixture
async def chat_server(aiohttp_server: Any) -> ChatServer:
    chat = ChatServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat.handle)
    server: TestServer = await aiohttp_server(app)
    chat.url = str(server.make_url("/v1"))
    return chat


@pytest.fixture
async def llm(chat_server: ChatServer) -> AsyncIterator[ChatCompletionsClient]:
    client = ChatCompletionsClient(
        LLMSettings(base_url=chat_server.url, model="tiny-chat", api_key="sk-test", timeout_s=2)
    )
    try:
        yield client
    finally:
        await client.close()
