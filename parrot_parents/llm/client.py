"""A small OpenAI-compatible chat-completions client over aiohttp.

It speaks ``POST {base_url}/chat/completions`` as OpenAI, vLLM, llama.cpp's server, Ollama
(``/v1``) and most gateways do. Configuration comes from the constructor or the
``PARROT_PARENTS_LLM_*`` environment (:meth:`LLMSettings.from_env`; docs/service.md,
"Answers from an LLM").
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from parrot_parents.errors import ConfigurationError, LLMError

__all__ = [
    "BASE_URL_ENV",
    "ChatCompletion",
    "ChatCompletionsClient",
    "LLMSettings",
]

BASE_URL_ENV = "PARROT_PARENTS_LLM_BASE_URL"
API_KEY_ENV = "PARROT_PARENTS_LLM_API_KEY"
MODEL_ENV = "PARROT_PARENTS_LLM_MODEL"
TIMEOUT_ENV = "PARROT_PARENTS_LLM_TIMEOUT"

_RETRY_STATUS = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class LLMSettings:
    """Where and how to call the LLM.

    Attributes:
        base_url: ``http(s)://host[:port]/prefix``; ``/chat/completions`` is appended.
        model: model name sent in the request.
        api_key: bearer token, or None; never shown by ``repr``.
        timeout_s: seconds per request (connect + answer), default 60.
        temperature: sampling temperature in [0, 2], default 0.
        max_tokens: answer length cap in tokens, default None (the server's).
        retries: extra attempts after a connection error or HTTP 429/502/503/504, default 1.

    Raises:
        ConfigurationError: a bad URL, empty model, or out-of-range number.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 60.0
    temperature: float = 0.0
    max_tokens: int | None = None
    retries: int = 1

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url) if isinstance(self.base_url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigurationError(
                f"LLM base_url must be an http(s) URL, got {self.base_url!r}",
                hint=f"e.g. {BASE_URL_ENV}=http://127.0.0.1:8000/v1",
            )
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigurationError(
                f"LLM model must be a non-empty string, got {self.model!r}",
                hint=f"set {MODEL_ENV}",
            )
        if not self.timeout_s > 0:
            raise ConfigurationError(f"LLM timeout_s must be > 0, got {self.timeout_s!r}")
        if not 0 <= self.temperature <= 2:
            raise ConfigurationError(f"LLM temperature must be in [0, 2], got {self.temperature!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ConfigurationError(f"LLM max_tokens must be >= 1, got {self.max_tokens!r}")
        if self.retries < 0:
            raise ConfigurationError(f"LLM retries must be >= 0, got {self.retries!r}")

    @property
    def url(self) -> str:
        """The chat-completions endpoint."""
        return self.base_url.rstrip("/") + "/chat/completions"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> LLMSettings | None:
        """Settings from ``PARROT_PARENTS_LLM_BASE_URL``, ``_MODEL`` (both required),
        ``_API_KEY`` (sent as ``Authorization: Bearer ...``) and ``_TIMEOUT`` (seconds per
        request, default 60); None when no base URL is set.

        Raises:
            ConfigurationError: a base URL without a model, or a bad timeout.
        """
        env = os.environ if environ is None else environ
        base_url = env.get(BASE_URL_ENV, "").strip()
        if not base_url:
            return None
        timeout = env.get(TIMEOUT_ENV, "60")
        try:
            timeout_s = float(timeout)
        except ValueError:
            raise ConfigurationError(f"{TIMEOUT_ENV} must be a number, got {timeout!r}") from None
        return cls(
            base_url=base_url,
            model=env.get(MODEL_ENV, "").strip(),
            api_key=env.get(API_KEY_ENV) or None,
            timeout_s=timeout_s,
        )


@dataclass(frozen=True)
class ChatCompletion:
    """An answer: its ``text``, the ``model`` that wrote it, ``finish_reason``, the server's
    token ``usage`` (``{}`` when not reported) and ``latency_ms`` of the request."""

    text: str
    model: str
    finish_reason: str | None
    usage: dict[str, Any]
    latency_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "finish_reason": self.finish_reason,
            "usage": dict(self.usage),
            "latency_ms": self.latency_ms,
        }


class ChatCompletionsClient:
    """Calls an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        settings: where and how to call.
        session: an ``aiohttp.ClientSession`` to share (not closed by :meth:`close`);
            by default one is created on first use.

    Usable with ``async with``; :meth:`close` is safe to call twice.
    """

    def __init__(
        self, settings: LLMSettings, *, session: aiohttp.ClientSession | None = None
    ) -> None:
        self.settings = settings
        self._session = session
        self._owns_session = session is None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ChatCompletionsClient | None:
        """A client configured from the environment, or None (see :class:`LLMSettings`)."""
        settings = LLMSettings.from_env(environ)
        return None if settings is None else cls(settings)

    def __repr__(self) -> str:
        return f"ChatCompletionsClient({self.settings.url!r}, model={self.settings.model!r})"

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None and self._owns_session:
            await asyncio.shield(session.close())

    async def __aenter__(self) -> ChatCompletionsClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession()
            self._owns_session = True
        return self._session

    async def complete(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> ChatCompletion:
        """Send ``messages`` (``[{"role": ..., "content": ...}, ...]``) and return the answer.

        Raises:
            LLMError: the endpoint cannot be reached, times out, answers a non-200 status
                (``status`` is set) or a body without ``choices[0].message.content``.
        """
        s = self.settings
        body: dict[str, Any] = {
            "model": s.model,
            "messages": [dict(m) for m in messages],
            "temperature": s.temperature if temperature is None else temperature,
            "stream": False,
        }
        if (max_tokens or s.max_tokens) is not None:
            body["max_tokens"] = max_tokens or s.max_tokens
        headers = {"Content-Type": "application/json"}
        if s.api_key:
            headers["Authorization"] = f"Bearer {s.api_key}"
        started = time.perf_counter()
        data = await self._post(body, headers)
        latency = round((time.perf_counter() - started) * 1000.0, 3)
        try:
            choice = data["choices"][0]
            text = choice["message"]["content"]
            if not isinstance(text, str):
                raise TypeError(type(text).__name__)
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(
                "the LLM answer has no choices[0].message.content string",
                status=200,
            ) from exc
        reported = data.get("usage")
        usage: dict[str, Any] = reported if isinstance(reported, dict) else {}
        return ChatCompletion(
            text=text,
            model=str(data.get("model") or s.model),
            finish_reason=choice.get("finish_reason"),
            usage=usage,
            latency_ms=latency,
        )

    async def _post(self, body: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        s = self.settings
        timeout = aiohttp.ClientTimeout(total=s.timeout_s)
        for attempt in range(s.retries + 1):
            last = attempt == s.retries
            try:
                async with self._get_session().post(
                    s.url, json=body, headers=headers, timeout=timeout
                ) as resp:
                    if resp.status in _RETRY_STATUS and not last:
                        await asyncio.sleep(0.5 * (attempt + 1))
                        continue
                    if resp.status != 200:
                        detail = (await resp.text())[:200].strip()
                        raise LLMError(
                            f"the LLM answered HTTP {resp.status}: {detail or resp.reason}",
                            status=resp.status,
                        )
                    try:
                        data = await resp.json(content_type=None)
                    except ValueError as exc:
                        raise LLMError("the LLM answer is not JSON", status=200) from exc
                    if not isinstance(data, dict):
                        raise LLMError("the LLM answer is not a JSON object", status=200)
                    return data
            except (aiohttp.ClientError, TimeoutError) as exc:
                if not last:
                    await asyncio.sleep(0.5 * (attempt + 1))
                    continue
                raise LLMError(
                    f"cannot reach the LLM at {s.url}: {type(exc).__name__}",
                    hint=f"check {BASE_URL_ENV} and that the server is up",
                ) from exc
        raise AssertionError("unreachable")  # pragma: no cover
