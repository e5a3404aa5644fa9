"""Micro-batched query embedding: concurrent calls share forward passes.

The real model runs every encode; forward passes are counted by a subclass that records
the texts of each ``encode`` call. No clocks: concurrency comes from ``asyncio.gather``,
and a test that needs an encode "in progress" holds it on a ``threading.Event``.
"""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parrot_parents.embeddings.batching import QueryBatcher
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.errors import ConfigurationError
from parrot_parents.sync import run_sync

QUESTIONS = [
    "How will I be paid, and when?",
    "What is the mileage rate?",
    "Can I carry over unused vacation days?",
    "Who approves overtime?",
    "pay",
    "What happens to my benefits if I leave the company before the end of the year?",
]


class CountingEmbeddings(SentenceTransformerEmbeddings):
    """The real model; records the texts of every ``encode`` call (one call = one batch)."""

    def __init__(self, shared: SentenceTransformerEmbeddings, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._model = shared.model  # the session's loaded model, no second load
        self.calls: list[list[str]] = []
        self.fail_on: str | None = None
        self.gate: threading.Event | None = None
        self.started = threading.Event()

    def encode(self, texts: list[str], *, batch_size: int | None = None) -> np.ndarray:
        self.calls.append(list(texts))
        self.started.set()
        if self.gate is not None:
            self.gate.wait()
        if self.fail_on is not None and self.fail_on in texts:
            raise RuntimeError(f"cannot embed {self.fail_on!r}")
        return super().encode(texts, batch_size=batch_size)


@pytest.fixture
def counting(embeddings: SentenceTransformerEmbeddings) -> CountingEmbeddings:
    return CountingEmbeddings(embeddings)


def _assert_same(got: list[float], text: str, reference: SentenceTransformerEmbeddings) -> None:
    want = reference.embed_query(text)
    assert len(got) == len(want)
    assert np.allclose(got, want, atol=1e-5, rtol=0), text


async def test_concurrent_queries_share_one_forward_pass_with_the_same_vectors(
    counting: CountingEmbeddings, embeddings: SentenceTransformerEmbeddings
) -> None:
    vectors = await asyncio.gather(*(counting.aembed_query(q) for q in QUESTIONS))
    assert counting.calls == [QUESTIONS]
    for question, vector in zip(QUESTIONS, vectors, strict=True):
        assert isinstance(vector, list) and isinstance(vector[0], float)
        _assert_same(vector, question, embeddings)


async def test_identical_concurrent_questions_share_one_embedding(
    counting: CountingEmbeddings,
) -> None:
    asked = ["pay day?"] * 10 + ["mileage?", "pay day?"]
    vectors = await asyncio.gather(*(counting.aembed_query(q) for q in asked))
    assert counting.calls == [["pay day?", "mileage?"]]
    assert all(v == vectors[0] for v in vectors[:10])
    vectors[0][0] = 42.0  # each caller owns its list
    assert vectors[1][0] != 42.0


async def test_a_question_being_encoded_is_not_encoded_again(counting: CountingEmbeddings) -> None:
    counting.gate = threading.Event()
    first = asyncio.ensure_future(counting.aembed_query("pay day?"))
    await asyncio.to_thread(counting.started.wait)  # the encode of "pay day?" runs now
    second = asyncio.ensure_future(counting.aembed_query("pay day?"))
    await asyncio.sleep(0)
    counting.gate.set()
    assert await first == await second
    assert counting.calls == [["pay day?"]]


async def test_batches_are_bounded(embeddings: SentenceTransformerEmbeddings) -> None:
    counting = CountingEmbeddings(embeddings, max_query_batch=4)
    texts = [f"question number {i}" for i in range(10)]
    await asyncio.gather(*(counting.aembed_query(t) for t in texts))
    assert counting.calls == [texts[:4], texts[4:8], texts[8:]]


async def test_an_encode_error_reaches_every_caller_of_that_batch(
    counting: CountingEmbeddings, embeddings: SentenceTransformerEmbeddings
) -> None:
    counting.fail_on = "poison"
    results = await asyncio.gather(
        *(counting.aembed_query(q) for q in ["a", "poison", "b", "poison"]),
        return_exceptions=True,
    )
    assert all(isinstance(r, RuntimeError) and "poison" in str(r) for r in results)
    counting.fail_on = None
    _assert_same(await counting.aembed_query("a"), "a", embeddings)  # the batcher recovers
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_cancelling_one_caller_leaves_the_others_their_vectors(
    counting: CountingEmbeddings, embeddings: SentenceTransformerEmbeddings
) -> None:
    counting.gate = threading.Event()
    same = [asyncio.ensure_future(counting.aembed_query("shared")) for _ in range(2)]
    other = asyncio.ensure_future(counting.aembed_query("other"))
    await asyncio.to_thread(counting.started.wait)  # the batch is in the model now
    same[0].cancel()
    counting.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await same[0]
    _assert_same(await same[1], "shared", embeddings)
    _assert_same(await other, "other", embeddings)
    assert counting.calls == [["shared", "other"]]


async def test_a_caller_cancelled_while_waiting_does_not_stop_the_batch(
    counting: CountingEmbeddings, embeddings: SentenceTransformerEmbeddings
) -> None:
    tasks = [asyncio.ensure_future(counting.aembed_query(q)) for q in QUESTIONS[:3]]
    await asyncio.sleep(0)  # all three are queued; the batch has not started
    tasks[0].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[0], asyncio.CancelledError)
    for question, vector in zip(QUESTIONS[1:3], results[1:], strict=True):
        _assert_same(vector, question, embeddings)  # type: ignore[arg-type]


async def test_no_task_is_left_behind(counting: CountingEmbeddings) -> None:
    await asyncio.gather(*(counting.aembed_query(q) for q in QUESTIONS))
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_two_event_loops_use_the_batcher_at_once(
    counting: CountingEmbeddings, embeddings: SentenceTransformerEmbeddings
) -> None:
    # run_sync runs on the package's own loop in another thread, beside this test's loop.
    counting.gate = threading.Event()
    here = asyncio.ensure_future(counting.aembed_query("from this loop"))
    await asyncio.to_thread(counting.started.wait)
    there = asyncio.ensure_future(
        asyncio.to_thread(run_sync, counting.aembed_query("from the package loop"))
    )
    counting.gate.set()
    _assert_same(await here, "from this loop", embeddings)
    _assert_same(await there, "from the package loop", embeddings)
    assert sorted(map(tuple, counting.calls)) == [("from the package loop",), ("from this loop",)]


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    asked=st.lists(st.sampled_from(QUESTIONS), min_size=1, max_size=20),
    max_batch=st.integers(min_value=1, max_value=5),
)
def test_every_caller_gets_its_own_question_s_vector(
    embeddings: SentenceTransformerEmbeddings, asked: list[str], max_batch: int
) -> None:
    counting = CountingEmbeddings(embeddings, max_query_batch=max_batch, query_window_s=0)

    async def ask_all() -> list[list[float]]:  # a fresh event loop per example
        return await asyncio.gather(*(counting.aembed_query(q) for q in asked))

    vectors = asyncio.run(ask_all())
    distinct = list(dict.fromkeys(asked))
    assert [t for call in counting.calls for t in call] == distinct
    assert len(counting.calls) == math.ceil(len(distinct) / max_batch)
    for question, vector in zip(asked, vectors, strict=True):
        _assert_same(vector, question, embeddings)


@pytest.mark.parametrize("bad", [{"max_batch": 0}, {"max_batch": True}, {"window_s": -1.0}])
def test_bad_settings_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        QueryBatcher(lambda texts: [], **bad)
