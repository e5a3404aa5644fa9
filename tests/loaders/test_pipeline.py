"""The bounded queue between the model and the database writer (loaders.pipeline)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from parrot_parents.loaders.pipeline import pipelined


async def _settle() -> None:
    """Let every ready task run until it blocks (no clock involved)."""
    for _ in range(50):
        await asyncio.sleep(0)


async def test_the_producer_blocks_when_the_queue_is_full() -> None:
    produced: list[int] = []
    consumed: list[int] = []
    release = asyncio.Event()

    async def items() -> AsyncIterator[int]:
        for i in range(10):
            produced.append(i)
            yield i

    async def slow(item: int) -> None:
        await release.wait()  # the database is busy until released
        consumed.append(item)

    task = asyncio.create_task(pipelined(items(), slow, maxsize=2))
    await _settle()
    # One item in the consumer's hands, two in the queue, one produced and waiting for
    # room: the producer is blocked, not running ahead.
    assert consumed == []
    assert len(produced) == 4
    await _settle()
    assert len(produced) == 4
    release.set()
    await task
    assert consumed == list(range(10))


async def test_the_consumer_overlaps_the_producer() -> None:
    # The writer's first item is taken before the producer has finished the second one.
    order: list[str] = []
    second_started = asyncio.Event()

    async def items() -> AsyncIterator[int]:
        order.append("produce 0")
        yield 0
        second_started.set()
        order.append("produce 1")
        yield 1

    async def consume(item: int) -> None:
        if item == 0:
            await second_started.wait()
        order.append(f"consume {item}")

    await pipelined(items(), consume, maxsize=1)
    assert order == ["produce 0", "produce 1", "consume 0", "consume 1"]


async def test_errors_of_either_side_propagate_in_order() -> None:
    consumed: list[int] = []

    async def failing() -> AsyncIterator[int]:
        yield 1
        yield 2
        raise RuntimeError("model failed")

    async def consume(item: int) -> None:
        consumed.append(item)

    with pytest.raises(RuntimeError, match="model failed"):
        await pipelined(failing(), consume)
    assert consumed == [1, 2]  # what was produced before the error is still written

    produced: list[int] = []

    async def many() -> AsyncIterator[int]:
        for i in range(100):
            produced.append(i)
            yield i

    async def broken(item: int) -> None:
        raise ValueError("database refused")

    with pytest.raises(ValueError, match="database refused"):
        await pipelined(many(), broken, maxsize=2)
    assert len(produced) <= 4  # the producer was stopped, not run to the end
    with pytest.raises(ValueError):
        await pipelined(many(), broken, maxsize=0)
