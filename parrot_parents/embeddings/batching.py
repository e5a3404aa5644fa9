"""Micro-batching of query embeddings: concurrent callers share forward passes.

A :class:`QueryBatcher` gathers the texts callers on one event loop ask for, waits a short
window (default 2 ms) unless a full batch is waiting, and runs one ``encode`` of up to
``max_batch`` texts in a worker thread; a text asked for again while pending shares that
computation. One queue and at most one worker per loop (futures belong to their loop; the
``*_sync`` twins run on a loop of their own), held weakly; the worker exits when its queue
is empty. Callers await through :func:`asyncio.shield`, so cancelling one never cancels
the others' computation; an ``encode`` error reaches every text of its batch.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from parrot_parents.errors import ConfigurationError

__all__ = ["DEFAULT_MAX_BATCH", "DEFAULT_WINDOW_S", "QueryBatcher"]

#: Texts per forward pass at most.
DEFAULT_MAX_BATCH = 64
#: How long the first text of a batch waits for others (seconds).
DEFAULT_WINDOW_S = 0.002

#: ``encode(texts) -> rows``: one row (a sequence of floats, e.g. a numpy vector) per text;
#: a 2-D numpy array is such a collection of rows.
Encode = Callable[[list[str]], Collection[Any]]


@dataclass
class _LoopQueue:
    """The texts of one event loop: waiting (in arrival order) and being encoded."""

    waiting: dict[str, asyncio.Future[Any]] = field(default_factory=dict)
    encoding: dict[str, asyncio.Future[Any]] = field(default_factory=dict)
    worker: asyncio.Task[None] | None = None


class QueryBatcher:
    """Shares ``encode`` calls between concurrent :meth:`embed` calls of one process.

    Args:
        encode: embeds a list of texts in one call (run in a worker thread); returns one
            row per text, in order. It must be safe to call from a thread.
        max_batch: texts per ``encode`` call at most; default 64.
        window_s: seconds the first text of a batch waits for more texts when fewer than
            ``max_batch`` wait; default 0.002. ``0`` still lets every caller that is ready
            in the same loop iteration join.

    Attributes:
        batches: ``encode`` calls made so far (for reports).

    Raises:
        ConfigurationError: ``max_batch < 1`` or a negative ``window_s``.
    """

    def __init__(
        self,
        encode: Encode,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        window_s: float = DEFAULT_WINDOW_S,
    ) -> None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ConfigurationError(f"max_batch must be an int >= 1, got {max_batch!r}")
        if not window_s >= 0:
            raise ConfigurationError(f"window_s must be >= 0 seconds, got {window_s!r}")
        self._encode = encode
        self.max_batch = max_batch
        self.window_s = float(window_s)
        self.batches = 0
        self._queues: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopQueue] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()  # the loops may run in different threads

    def _queue(self, loop: asyncio.AbstractEventLoop) -> _LoopQueue:
        with self._lock:
            return self._queues.setdefault(loop, _LoopQueue())

    async def embed(self, text: str) -> list[float]:
        """The row of ``text``, computed in a batch with the other waiting texts.

        Returns:
            A new list of floats (callers may change it freely).

        Raises:
            Exception: whatever ``encode`` raised for the batch that held ``text``.
        """
        loop = asyncio.get_running_loop()
        queue = self._queue(loop)
        future = queue.waiting.get(text) or queue.encoding.get(text)
        if future is None:
            future = queue.waiting[text] = loop.create_future()
            if queue.worker is None:
                queue.worker = loop.create_task(self._work(queue), name="query-batcher")
        row = await asyncio.shield(future)
        return row.tolist() if hasattr(row, "tolist") else [float(x) for x in row]

    async def _work(self, queue: _LoopQueue) -> None:
        try:
            while queue.waiting:
                if len(queue.waiting) < self.max_batch:
                    await asyncio.sleep(self.window_s)
                texts = list(queue.waiting)[: self.max_batch]
                for text in texts:
                    queue.encoding[text] = queue.waiting.pop(text)
                # Only this worker settles the futures (callers await them shielded).
                try:
                    rows = await asyncio.to_thread(self._encode, texts)
                    if len(rows) != len(texts):
                        raise RuntimeError(f"encode returned {len(rows)} rows for {len(texts)}")
                except Exception as exc:
                    for text in texts:
                        queue.encoding.pop(text).set_exception(exc)
                else:
                    self.batches += 1
                    for text, row in zip(texts, rows, strict=True):
                        queue.encoding.pop(text).set_result(row)
        except BaseException:
            # Cancelled (its loop is closing): nobody may wait forever on a lost batch.
            for future in [*queue.encoding.values(), *queue.waiting.values()]:
                future.cancel()
            queue.encoding.clear()
            queue.waiting.clear()
            raise
        finally:
            queue.worker = None
