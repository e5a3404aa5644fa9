"""The one guarded path of every model call an ingestion strategy makes.

:meth:`GuardedModel.ask` never raises on the model's account: a cached reply (key: model
name and prompt sha256) costs no call; otherwise at most ``concurrency`` calls run at a
time, a raising call is retried ``retries`` times after ``backoff_s * 2**attempt``
seconds, and a failed, empty or unparsable reply gives None, counted by kind
(docs/strategies.md, "Model calls"). The client is anything with the ``complete``
coroutine of :class:`~parrot_parents.llm.client.ChatCompletionsClient`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from parrot_parents.errors import ConfigurationError
from parrot_parents.strategies.cache import PromptCache, prompt_sha256

__all__ = ["ChatClient", "GuardedModel", "MalformedReply", "ModelStats"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class MalformedReply(ValueError):
    """Raised by a strategy's parser when a reply does not have the expected shape."""


class ChatClient(Protocol):
    """What :class:`GuardedModel` needs of a client (the OpenAI-compatible one fits)."""

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> Any: ...


@dataclass
class ModelStats:
    """Model use of one ingestion: calls made, cache hits, tokens, failures by kind."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    failures: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "cache_hits": self.cache_hits,
            "tokens": {"prompt": self.prompt_tokens, "completion": self.completion_tokens},
            "failures": dict(self.failures),
        }


class GuardedModel:
    """A model client behind the guarded path (the module docstring).

    Args:
        client: the chat client.
        model: the model name used in the cache key; default: ``client.settings.model``.
        cache: where replies are kept; None: no cache (every ingest pays again).
        concurrency: calls in flight at once, default 4.
        retries: extra attempts after a call that raises, default 2.
        backoff_s: first backoff in seconds, doubled each attempt, default 0.5.
        max_tokens: answer length cap per call in tokens, default 512.
        owns_client: :meth:`close` also closes the client (default False).

    Raises:
        ConfigurationError: a bound below its minimum, or no model name to key the cache.
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        model: str | None = None,
        cache: PromptCache | None = None,
        concurrency: int = 4,
        retries: int = 2,
        backoff_s: float = 0.5,
        max_tokens: int = 512,
        owns_client: bool = False,
    ) -> None:
        if concurrency < 1:
            raise ConfigurationError(f"concurrency must be >= 1, got {concurrency!r}")
        if retries < 0:
            raise ConfigurationError(f"retries must be >= 0, got {retries!r}")
        if not backoff_s >= 0:
            raise ConfigurationError(f"backoff_s must be >= 0 seconds, got {backoff_s!r}")
        if max_tokens < 1:
            raise ConfigurationError(f"max_tokens must be >= 1, got {max_tokens!r}")
        name = model or getattr(getattr(client, "settings", None), "model", None)
        if not isinstance(name, str) or not name:
            raise ConfigurationError(
                "the model name is unknown: it keys the reply cache",
                hint="pass model=, or a client with settings.model",
            )
        self.client = client
        self.model = name
        self.cache = cache
        self.retries = retries
        self.backoff_s = backoff_s
        self.max_tokens = max_tokens
        self.stats = ModelStats()
        self._slots = asyncio.Semaphore(concurrency)
        self._owns_client = owns_client

    async def close(self) -> None:
        """Close the cache file, and the client when owned. Safe to call twice."""
        if self.cache is not None:
            self.cache.close()
        close = getattr(self.client, "close", None)
        if self._owns_client and close is not None:
            await close()

    def _failed(self, kind: str, why: str) -> None:
        self.stats.failures[kind] = self.stats.failures.get(kind, 0) + 1
        logger.warning("model call gave nothing usable (%s): %s", kind, why)

    async def ask(
        self, messages: Sequence[Mapping[str, str]], parse: Callable[[str], T]
    ) -> T | None:
        """The parsed reply to ``messages``, or None (counted) when nothing usable came.

        ``parse`` raises :class:`MalformedReply` (or any ``ValueError``) for a reply of
        the wrong shape.
        """
        digest = prompt_sha256(messages)
        if self.cache is not None:
            cached = await self.cache.get(self.model, digest)
            if cached is not None:
                try:
                    value = parse(cached)
                except ValueError:
                    value = None  # a parser changed since: ask again
                if value is not None:
                    self.stats.cache_hits += 1
                    return value
        reply = await self._call(messages)
        if reply is None:
            return None
        text = reply.strip()
        if not text:
            self._failed("empty", "the reply is empty")
            return None
        try:
            value = parse(text)
        except ValueError as exc:
            self._failed("malformed", str(exc)[:200])
            return None
        if self.cache is not None:
            await self.cache.put(self.model, digest, text)
        return value

    async def _call(self, messages: Sequence[Mapping[str, str]]) -> str | None:
        """The reply text, retried with backoff; None (counted as ``error``) at the end."""
        for attempt in range(self.retries + 1):
            try:
                async with self._slots:
                    self.stats.calls += 1
                    answer = await self.client.complete(messages, max_tokens=self.max_tokens)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any failure of the call degrades this chunk only
                if attempt < self.retries:
                    await asyncio.sleep(self.backoff_s * 2**attempt)
                    continue
                self._failed("error", f"{type(exc).__name__}: {str(exc)[:200]}")
                return None
            usage = getattr(answer, "usage", None) or {}
            self.stats.prompt_tokens += _tokens(usage, "prompt_tokens")
            self.stats.completion_tokens += _tokens(usage, "completion_tokens")
            text = getattr(answer, "text", None)
            return text if isinstance(text, str) else ""
        raise AssertionError("unreachable")  # pragma: no cover


def _tokens(usage: Any, key: str) -> int:
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
