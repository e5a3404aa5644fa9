"""The guarded path: bounded concurrency, retries with backoff, failures by kind, cache."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from parrot_parents.errors import ConfigurationError
from parrot_parents.llm.client import ChatCompletion
from parrot_parents.strategies.cache import PromptCache, prompt_sha256
from parrot_parents.strategies.guarded import GuardedModel
from parrot_parents.strategies.prompts import parse_text
from tests.strategies.conftest import ScriptedLLM, failing


class SlowLLM:
    """Counts how many calls are in flight at once."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0

    async def complete(self, messages: Sequence[Mapping[str, str]], **_: Any) -> ChatCompletion:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        return ChatCompletion("ok", "slow", "stop", {"prompt_tokens": 3}, 1.0)


def msgs(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"<chunk>\n{text}\n</chunk>"}]


async def test_calls_in_flight_never_exceed_the_bound() -> None:
    llm = SlowLLM()
    model = GuardedModel(llm, model="slow", concurrency=3)
    replies = await asyncio.gather(*(model.ask(msgs(str(i)), parse_text) for i in range(20)))
    assert replies == ["ok"] * 20
    assert llm.peak == 3
    assert model.stats.calls == 20 and model.stats.prompt_tokens == 60


async def test_a_failing_call_is_retried_with_growing_backoff(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def fake_sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)

    attempts = {"n": 0}

    def script(chunk: str | None, document: str | None) -> Any:
        attempts["n"] += 1
        return failing() if attempts["n"] < 3 else "third time lucky"

    monkeypatch.setattr("parrot_parents.strategies.guarded.asyncio.sleep", fake_sleep)
    model = GuardedModel(ScriptedLLM(script), retries=3, backoff_s=0.5)
    assert await model.ask(msgs("x"), parse_text) == "third time lucky"
    assert waits == [0.5, 1.0]
    assert model.stats.calls == 3 and model.stats.failures == {}


async def test_exhausted_retries_count_one_error() -> None:
    model = GuardedModel(ScriptedLLM(lambda c, d: failing(TimeoutError())), retries=1, backoff_s=0)
    assert await model.ask(msgs("x"), parse_text) is None
    assert model.stats.calls == 2 and model.stats.failures == {"error": 1}


async def test_cancellation_is_not_swallowed() -> None:
    model = GuardedModel(ScriptedLLM(lambda c, d: asyncio.CancelledError()), backoff_s=0)
    with pytest.raises(asyncio.CancelledError):
        await model.ask(msgs("x"), parse_text)


async def test_cache_is_keyed_by_model_and_prompt(tmp_path: Path) -> None:
    cache = PromptCache(tmp_path / "c.sqlite3")
    first = GuardedModel(ScriptedLLM(lambda c, d: f"note on {c}"), cache=cache)
    assert await first.ask(msgs("a"), parse_text) == "note on a"
    assert first.stats.calls == 1
    again = GuardedModel(ScriptedLLM(lambda c, d: "other"), cache=PromptCache(cache.path))
    assert await again.ask(msgs("a"), parse_text) == "note on a"  # from the file
    assert (again.stats.calls, again.stats.cache_hits) == (0, 1)
    assert await again.ask(msgs("b"), parse_text) == "other"  # another prompt pays
    other_model = GuardedModel(ScriptedLLM(lambda c, d: "m2", model="m2"), cache=cache)
    assert await other_model.ask(msgs("a"), parse_text) == "m2"
    assert await cache.get("m1", prompt_sha256(msgs("a"))) == "note on a"
    await first.close()
    await again.close()


async def test_failed_replies_are_not_cached(tmp_path: Path) -> None:
    cache = PromptCache(tmp_path / "c.sqlite3")
    model = GuardedModel(ScriptedLLM(lambda c, d: ""), cache=cache)
    assert await model.ask(msgs("a"), parse_text) is None
    assert await cache.get("m1", prompt_sha256(msgs("a"))) is None
    assert model.stats.failures == {"empty": 1}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"concurrency": 0}, "concurrency must be >= 1, got 0"),
        ({"retries": -1}, "retries must be >= 0, got -1"),
        ({"backoff_s": -1.0}, "backoff_s must be >= 0 seconds"),
        ({"max_tokens": 0}, "max_tokens must be >= 1, got 0"),
    ],
)
def test_bad_bounds_are_refused(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        GuardedModel(ScriptedLLM(lambda c, d: "x"), **kwargs)


def test_a_client_without_a_model_name_needs_one() -> None:
    with pytest.raises(ConfigurationError, match="model name is unknown"):
        GuardedModel(SlowLLM())
