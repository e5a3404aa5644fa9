"""The chat-completions client against a local server that speaks the protocol."""

from __future__ import annotations

import pytest

from parrot_parents.errors import ConfigurationError, LLMError
from parrot_parents.llm.client import ChatCompletionsClient, LLMSettings
from tests.server.conftest import ChatServer

MESSAGES = [{"role": "user", "content": "hi"}]


async def test_a_completion(chat_server: ChatServer, llm: ChatCompletionsClient) -> None:
    result = await llm.complete(MESSAGES, max_tokens=50)
    assert result.text.startswith("Salaries are paid monthly")
    assert result.model == "tiny-chat" and result.finish_reason == "stop"
    assert result.usage["total_tokens"] == 15 and result.latency_ms > 0
    sent = chat_server.requests[0]
    assert sent == {
        "model": "tiny-chat",
        "messages": MESSAGES,
        "temperature": 0.0,
        "stream": False,
        "max_tokens": 50,
    }
    assert chat_server.headers[0]["Authorization"] == "Bearer sk-test"


async def test_a_busy_server_is_retried_once(
    chat_server: ChatServer, llm: ChatCompletionsClient
) -> None:
    chat_server.behaviour = "flaky503"
    result = await llm.complete(MESSAGES)
    assert result.text and len(chat_server.requests) == 2


async def test_an_error_status_is_an_llm_error(
    chat_server: ChatServer, llm: ChatCompletionsClient
) -> None:
    chat_server.behaviour = "error500"
    with pytest.raises(LLMError, match="the LLM answered HTTP 500") as info:
        await llm.complete(MESSAGES)
    assert info.value.status == 500


async def test_a_body_without_choices_is_an_llm_error(
    chat_server: ChatServer, llm: ChatCompletionsClient
) -> None:
    chat_server.behaviour = "garbage"
    with pytest.raises(LLMError, match=r"no choices\[0\].message.content"):
        await llm.complete(MESSAGES)


async def test_a_timeout_is_an_llm_error(chat_server: ChatServer) -> None:
    chat_server.behaviour = "slow"
    settings = LLMSettings(base_url=chat_server.url, model="m", timeout_s=0.2, retries=0)
    async with ChatCompletionsClient(settings) as client:
        with pytest.raises(LLMError, match=r"cannot reach the LLM at .*: TimeoutError"):
            await client.complete(MESSAGES)


async def test_an_unreachable_server_is_an_llm_error() -> None:
    settings = LLMSettings(base_url="http://127.0.0.1:9/v1", model="m", retries=0)
    async with ChatCompletionsClient(settings) as client:
        with pytest.raises(LLMError, match=r"cannot reach the LLM at http://127.0.0.1:9/v1/chat"):
            await client.complete(MESSAGES)


def test_settings_from_the_environment() -> None:
    assert LLMSettings.from_env({}) is None
    s = LLMSettings.from_env(
        {
            "PARROT_PARENTS_LLM_BASE_URL": "http://localhost:8000/v1/",
            "PARROT_PARENTS_LLM_MODEL": "qwen",
            "PARROT_PARENTS_LLM_API_KEY": "sk-1",
            "PARROT_PARENTS_LLM_TIMEOUT": "5",
        }
    )
    assert s is not None
    assert (s.url, s.model, s.api_key, s.timeout_s) == (
        "http://localhost:8000/v1/chat/completions",
        "qwen",
        "sk-1",
        5.0,
    )
    assert "sk-1" not in repr(s)


@pytest.mark.parametrize(
    ("env", "match"),
    [
        ({"PARROT_PARENTS_LLM_BASE_URL": "http://x/v1"}, "LLM model must be a non-empty string"),
        (
            {"PARROT_PARENTS_LLM_BASE_URL": "ftp://x", "PARROT_PARENTS_LLM_MODEL": "m"},
            "base_url must be an http",
        ),
        (
            {
                "PARROT_PARENTS_LLM_BASE_URL": "http://x",
                "PARROT_PARENTS_LLM_MODEL": "m",
                "PARROT_PARENTS_LLM_TIMEOUT": "soon",
            },
            "PARROT_PARENTS_LLM_TIMEOUT must be a number",
        ),
    ],
)
def test_bad_environment(env: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        LLMSettings.from_env(env)
