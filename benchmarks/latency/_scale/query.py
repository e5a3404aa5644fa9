"""Variants of one query and their interleaved timing, for the scale benchmark.

Every variant answers "the same query" (index ``i`` into a query set) through one path:
bare asyncpg kNN, the store, the parent searcher, the bot, or LangChain's
ParentDocumentRetriever. :func:`interleave` runs all variants for query 0 in a shuffled
order, then all for query 1, and so on, so drift of the machine (the other agents on its
two cores) spreads over every variant alike; the shuffle keeps one variant from always
paying the cache misses of a new query vector.
"""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

__all__ = ["Stat", "Variant", "interleave", "percentile", "unique_texts"]


@dataclass
class Variant:
    """One way of answering query ``i``."""

    key: str
    label: str
    run: Callable[[int], Awaitable[object]]
    note: str = ""
    #: Run only on the first ``limit`` queries (a variant too slow for all of them).
    limit: int | None = None


@dataclass
class Stat:
    """Latencies of one variant, in ms."""

    key: str
    label: str
    samples: list[float] = field(default_factory=list)
    note: str = ""
    #: The warm-up runs' latencies, in ms (not in the percentiles).
    warm: list[float] = field(default_factory=list)

    @property
    def p50(self) -> float:
        return percentile(self.samples, 50)

    @property
    def p95(self) -> float:
        return percentile(self.samples, 95)


def percentile(values: list[float], q: int) -> float:
    """The q-th percentile (inclusive method, as the other benchmarks of the repo)."""
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


async def interleave(
    variants: list[Variant],
    queries: int,
    warmup: int,
    seed: int = 0,
    warmup_offset: int | None = None,
) -> dict[str, Stat]:
    """Time every variant on queries ``0..queries-1``, query by query, order shuffled.

    Warm-up runs every variant on ``warmup`` other queries (from ``warmup_offset``, by
    default right after the measured ones); its latencies are kept apart
    (:attr:`Stat.warm`), out of the percentiles.
    """
    rng = random.Random(seed)
    offset = queries if warmup_offset is None else warmup_offset
    stats = {v.key: Stat(v.key, v.label, note=v.note) for v in variants}
    for i in range(warmup):
        for v in variants:
            if v.limit is None or i < min(warmup, 3):
                t = time.perf_counter()
                await v.run(offset + i)
                stats[v.key].warm.append((time.perf_counter() - t) * 1000.0)
    gc.collect()
    order = list(variants)
    for i in range(queries):
        rng.shuffle(order)
        for v in order:
            if v.limit is not None and i >= v.limit:
                continue
            t = time.perf_counter()
            await v.run(i)
            stats[v.key].samples.append((time.perf_counter() - t) * 1000.0)
    return stats


def unique_texts(texts: list[str]) -> list[str]:
    """Query texts, made distinct (each keys its own vector): a repeat gets `` (n)``."""
    seen: dict[str, int] = {}
    out = []
    for t in texts:
        seen[t] = seen.get(t, 0) + 1
        out.append(t if seen[t] == 1 else f"{t} ({seen[t]})")
    return out
