"""ai-parrot's own ``ask`` and ``invoke`` on ``HRBot(ParentChildMixin, BasicBot)`` over a
real collection, answered by a scripted LLM client written to ai-parrot's client
interface: it records what the bot handed it and answers a fixed text, with no network.

The bot is configured by ai-parrot's own ``configure()`` (its in-memory conversation
memory, its prompt), and the client reaches it as an instance through ``llm=``, which
ai-parrot passes through unchanged (``_resolve_llm_config``, ``_create_llm_client``).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from parrot.clients.base import AbstractClient
from parrot.memory.compaction import tokens
from parrot.memory.render import HistoryMessage
from parrot.models import AIMessage, CompletionUsage
from parrot.models.outputs import StructuredOutputConfig
from parrot.models.responses import InvokeResult

from parrot_parents import PgVectorStore
from tests.integrations.ai_parrot.conftest import QUESTION, HRBot
from tests.integrations.conftest import PAY

ANSWER = "Twice a month: on the 15th and on the last business day."
CHILD = "twice a month"  # in the first child of the pay document, so in both contexts

#: Provider keys a real client would read: none is set while these tests run.
PROVIDER_KEYS = (
    "OPENAI_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GROQ_API_KEY",
    "XAI_API_KEY",
    "HUGGINGFACEHUB_API_TOKEN",
)


class ScriptedClient(AbstractClient):
    """An ai-parrot LLM client that answers :data:`ANSWER` and records each call."""

    client_type = "scripted"
    client_name = "scripted"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(model="scripted-1", **kwargs)
        self.calls: list[dict[str, Any]] = []

    async def get_client(self) -> Any:
        """The "SDK client" ai-parrot caches per event loop: there is none to open."""
        return object()

    def _message(self, prompt: str) -> AIMessage:
        return AIMessage(
            input=prompt,
            output=ANSWER,
            response=ANSWER,
            model=self.model,
            provider=self.client_type,
            usage=CompletionUsage(prompt_tokens=0, completion_tokens=0, total_tokens=0),
            finish_reason="stop",
        )

    async def ask(
        self,
        prompt: str,
        model: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = 0.7,
        files: list[str | Path] | None = None,
        system_prompt: str | None = None,
        history: Sequence[HistoryMessage] | None = None,
        structured_output: type | StructuredOutputConfig | None = None,
        tools: list[dict[str, Any]] | None = None,
        use_tools: bool | None = None,
        deep_research: bool = False,
        background: bool = False,
        lazy_loading: bool = False,
    ) -> AIMessage:
        self.calls.append(
            {
                "method": "ask",
                "prompt": prompt,
                "system_prompt": system_prompt or "",
                "history": list(history or ()),
                "use_tools": use_tools,
            }
        )
        return self._message(prompt)

    async def ask_stream(self, prompt: str, **kwargs: Any) -> AsyncIterator[str | AIMessage]:
        self.calls.append({"method": "ask_stream", "prompt": prompt, **kwargs})
        yield ANSWER
        yield self._message(prompt)

    async def resume(self, session_id: str, user_input: str, state: dict[str, Any]) -> Any:
        raise NotImplementedError("the scripted client never suspends")

    async def invoke(
        self,
        prompt: str,
        *,
        output_type: type | None = None,
        structured_output: StructuredOutputConfig | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        use_tools: bool = False,
        tools: list[Any] | None = None,
    ) -> InvokeResult:
        self.calls.append({"method": "invoke", "prompt": prompt, "system_prompt": system_prompt})
        return InvokeResult(
            output=ANSWER,
            model=self.model,
            usage=CompletionUsage(prompt_tokens=0, completion_tokens=0, total_tokens=0),
        )


def _local(host: Any) -> bool:
    if not isinstance(host, str) or host.startswith("/") or host in ("", "localhost"):
        return True  # a Unix socket path, or this machine
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[Any]]]:
    """No provider key, and every connection or name lookup beyond this machine refused
    and recorded; every ai-parrot client constructed recorded too. Checked after the
    test, as ai-parrot swallows some errors (it falls back on them, and logs).

    ai-parrot's history compaction counts tokens with tiktoken, which downloads its
    encoding on first use: its heuristic counter (its own offline fallback) is set.
    """
    for key in PROVIDER_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(tokens, "_DEFAULT", tokens.HeuristicCounter())
    seen: dict[str, list[Any]] = {"network": [], "clients": []}
    connect, lookup = socket.socket.connect, socket.getaddrinfo
    client_init = AbstractClient.__init__

    def guarded_connect(sock: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if not _local(host):
            seen["network"].append(address)
            raise OSError(f"network refused in this test: {address!r}")
        return connect(sock, address)

    def guarded_lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and not _local(name):
            seen["network"].append(name)
            raise socket.gaierror(f"name lookup refused in this test: {name!r}")
        return lookup(host, *args, **kwargs)

    def recording_init(client: AbstractClient, *args: Any, **kwargs: Any) -> None:
        seen["clients"].append(type(client))
        client_init(client, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_lookup)
    monkeypatch.setattr(AbstractClient, "__init__", recording_init)
    yield seen
    assert seen["network"] == [], "something reached for the network"
    assert set(seen["clients"]) <= {ScriptedClient}, seen["clients"]


async def hr_bot(collection: PgVectorStore, **kwargs: Any) -> tuple[HRBot, ScriptedClient]:
    """The bot, configured by ai-parrot's ``configure()``, with a scripted client."""
    client = ScriptedClient()
    bot = HRBot(
        name="hr", llm=client, memory_type="memory", parrot_parents_store=collection, **kwargs
    )
    await bot.configure()
    assert bot.get_client() is client
    return bot, client


async def test_ask_hands_the_whole_parent_to_the_client_and_returns_its_answer(
    offline: dict[str, list[Any]], collection: PgVectorStore
) -> None:
    bot, client = await hr_bot(collection, expand_to_parent=True)
    response = await bot.ask(QUESTION, session_id="s1", user_id="u1")
    # (1) The scripted answer comes back through ai-parrot's ask, as its AIMessage.
    assert isinstance(response, AIMessage)
    assert response.output == ANSWER and response.response == ANSWER
    assert response.provider == "scripted" and response.session_id == "s1"
    (call,) = client.calls
    assert call["method"] == "ask" and call["prompt"] == QUESTION
    # (2) The context the client was handed: the whole pay document, once, first.
    assert call["system_prompt"].count(PAY) == 1
    assert response.used_vector_context and response.vector_context_length >= len(PAY)
    assert response.context_sources[0] == "pay.md"
    assert response.source_documents[0]["source"] == "pay.md"
    # Per call through ask: its search_kwargs reach the pipeline (ask itself takes no
    # expand_to_parent); the same session brings the first turn back as history.
    response = await bot.ask(
        QUESTION, session_id="s1", user_id="u1", search_kwargs={"expand_to_parent": False}
    )
    assert response.output == ANSWER
    second = client.calls[1]
    assert PAY not in second["system_prompt"] and CHILD in second["system_prompt"]
    assert [(m.role, m.content) for m in second["history"]] == [
        ("user", QUESTION),
        ("assistant", ANSWER),
    ]


async def test_ask_on_a_bot_without_expansion_hands_children(
    offline: dict[str, list[Any]], collection: PgVectorStore
) -> None:
    bot, client = await hr_bot(collection, expand_to_parent=False)
    response = await bot.ask(QUESTION)
    assert response.output == ANSWER
    assert PAY not in client.calls[0]["system_prompt"]
    assert CHILD in client.calls[0]["system_prompt"]
    await bot.ask(QUESTION, search_kwargs={"expand_to_parent": True})
    assert PAY in client.calls[1]["system_prompt"]


async def test_invoke_answers_through_the_client_without_retrieval(
    offline: dict[str, list[Any]], collection: PgVectorStore
) -> None:
    bot, client = await hr_bot(collection, expand_to_parent=True)
    response = await bot.invoke(QUESTION)
    assert isinstance(response, AIMessage) and response.output == ANSWER
    (call,) = client.calls
    # ai-parrot's invoke is the plain conversation: it builds no vector context.
    assert call["prompt"] == QUESTION and CHILD not in call["system_prompt"]
    assert not response.used_vector_context


def record_retrievals(bot: HRBot) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """What ai-parrot's ask passed to ``get_vector_context``, and the metadata back."""
    seen: list[tuple[dict[str, Any], dict[str, Any]]] = []
    inner = bot.get_vector_context

    async def recording(question: str, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        context, meta = await inner(question, **kwargs)
        seen.append((kwargs, meta))
        return context, meta

    bot.get_vector_context = recording  # type: ignore[method-assign]
    return seen


def similarity_notes(meta: dict[str, Any]) -> list[str]:
    return [n for n in meta["parrot_parents"].get("notes", []) if "below similarity" in n]


async def test_ask_applies_a_threshold_given_to_the_bot_or_the_call_not_the_catalogues(
    offline: dict[str, list[Any]], collection: PgVectorStore
) -> None:
    bot, client = await hr_bot(collection, expand_to_parent=False)
    seen = record_retrievals(bot)
    await bot.ask(QUESTION)
    kwargs, meta = seen[0]
    # ai-parrot's ask passes its catalogue default on every call; it is not applied.
    assert kwargs["score_threshold"] == bot.context_score_threshold > 0
    assert meta["score_threshold"] is None and similarity_notes(meta) == []
    assert CHILD in client.calls[0]["system_prompt"]
    # A value given to the call is.
    response = await bot.ask(QUESTION, score_threshold=0.99)
    assert seen[1][1]["score_threshold"] == 0.99 and similarity_notes(seen[1][1])
    assert not response.used_vector_context
    assert CHILD not in client.calls[1]["system_prompt"]
    # And one given to the bot.
    strict, strict_client = await hr_bot(collection, context_score_threshold=0.99)
    strict_seen = record_retrievals(strict)
    response = await strict.ask(QUESTION)
    assert similarity_notes(strict_seen[0][1]) and not response.used_vector_context
    assert response.output == ANSWER and CHILD not in strict_client.calls[0]["system_prompt"]
