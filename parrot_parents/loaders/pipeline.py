"""Overlap of two stages through a bounded queue: the model and the database writer.

While the writer stores batch ``k``, the producer (late chunking, in a worker thread)
already embeds batch ``k + 1``; the queue holds at most ``maxsize`` finished batches, so
a slow database bounds the memory held instead of letting the model run ahead without
limit. The producer blocks on a full queue; the consumer on an empty one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["DEFAULT_QUEUE_SIZE", "pipelined"]

T = TypeVar("T")

#: Finished batches waiting for the writer (each a few documents' rows and vectors).
DEFAULT_QUEUE_SIZE = 2

_END = object()


async def pipelined(
    items: AsyncIterable[T],
    consume: Callable[[T], Awaitable[None]],
    *,
    maxsize: int = DEFAULT_QUEUE_SIZE,
) -> None:
    """Run ``consume`` on every item of ``items``, in order, while the next are produced.

    ``items`` is iterated in its own task, which waits whenever ``maxsize`` items are
    produced and not yet taken by ``consume``.

    Args:
        items: the producer (an async generator).
        consume: awaited once per item, one at a time, in production order.
        maxsize: the queue's bound, >= 1 (default :data:`DEFAULT_QUEUE_SIZE`).

    Raises:
        ValueError: ``maxsize < 1``.
        Whatever the producer or ``consume`` raises: the producer's error after the items
        produced before it were consumed; on ``consume``'s error (or cancellation) the
        producer is cancelled.
    """
    if maxsize < 1:
        raise ValueError(f"maxsize must be >= 1, got {maxsize!r}")
    queue: asyncio.Queue[tuple[Any, BaseException | None]] = asyncio.Queue(maxsize)

    async def feed() -> None:
        try:
            async for item in items:
                await queue.put((item, None))
        except Exception as exc:  # handed to the consumer side, raised there in order
            await queue.put((_END, exc))
            return
        await queue.put((_END, None))

    feeder = asyncio.create_task(feed())
    try:
        while True:
            item, error = await queue.get()
            if error is not None:
                raise error
            if item is _END:
                return
            await consume(item)
    finally:
        feeder.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await feeder
