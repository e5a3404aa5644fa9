"""Recall@10 and kNN latency per ``ef_search`` on copies of the real corpus.

Each size gets its own table (``id``, ``embedding``) holding a random subset of the
children (the held-out ones never among them) and the product's HNSW index, as the
product defines it (:func:`parrot_parents.stores.postgres.collections.schema.collection_table`),
with the
build parameters of each candidate. Recall is
:func:`benchmarks.latency._scale.recall.recall_at_10` (exact top 10 by a sequential
scan, ties counted); latency is the kNN statement on one connection per ``ef_search``
(its settings set once, the product's ``iterative_scan`` and ``enable_seqscan = off``),
every ``ef_search`` timed on the same query before the next query, in a shuffled order
(:func:`benchmarks.latency._scale.query.interleave`).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import numpy as np

from benchmarks.latency._scale.load import connect_raw
from benchmarks.latency._scale.query import Stat, Variant, interleave
from benchmarks.latency._scale.recall import recall_at_10

__all__ = ["Build", "SizeResult", "hnsw_definition", "measure_size"]


@dataclass(frozen=True)
class Build:
    """HNSW build parameters of one candidate."""

    m: int
    ef_construction: int

    @property
    def tag(self) -> str:
        return f"m{self.m}_efc{self.ef_construction}"

    def __str__(self) -> str:
        return f"m={self.m}, ef_construction={self.ef_construction}"


@dataclass
class SizeResult:
    """Everything measured on one table (one size, one build)."""

    n: int
    build: Build
    build_s: float | None
    index_mb: float
    recall: dict[str, dict[int, float]] = field(default_factory=dict)
    latency: dict[int, Stat] = field(default_factory=dict)


def hnsw_definition(table: str, build: Build) -> str:
    """The product's CREATE INDEX for the HNSW index of ``table``, with ``build``."""
    from sqlalchemy.dialects import postgresql
    from sqlalchemy.schema import CreateIndex

    from parrot_parents.stores.postgres.collections.schema import HNSWIndex, collection_table

    t = collection_table(table, 384, hnsw=HNSWIndex(build.m, build.ef_construction))
    (index,) = [i for i in t.indexes if i.name is not None and i.name.endswith("hnsw")]
    return str(CreateIndex(index).compile(dialect=postgresql.dialect()))


async def _table(
    conn: asyncpg.Connection, name: str, vectors: np.ndarray, build: Build
) -> tuple[float | None, float]:
    """Create (or reuse, when its rows and index are there) ``name``; (build s, index MB)."""
    index = f"{name}_embedding_hnsw"
    exists = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", index)
    if exists and await conn.fetchval(f"SELECT count(*) FROM {name}") == len(vectors):
        mb = await conn.fetchval("SELECT pg_relation_size($1::regclass)", index) / 2**20
        return None, float(mb)
    await conn.execute(f"DROP TABLE IF EXISTS {name}")
    await conn.execute(f"CREATE TABLE {name} (id bigint PRIMARY KEY, embedding vector(384))")
    await conn.copy_records_to_table(
        name, records=[(i, v) for i, v in enumerate(vectors)], columns=["id", "embedding"]
    )
    # In memory, as a bulk build should be (~2.3 KB a 384-d vector, with headroom).
    mem = max(64, int(len(vectors) * 2300 * 1.25 / 2**20))
    await conn.execute(f"SET maintenance_work_mem = '{mem}MB'")
    t = time.perf_counter()
    await conn.execute(hnsw_definition(name, build))
    build_s = time.perf_counter() - t
    await conn.execute(f"ANALYZE {name}")
    mb = await conn.fetchval("SELECT pg_relation_size($1::regclass)", index) / 2**20
    return build_s, float(mb)


async def measure_size(
    dsn: str,
    vectors: np.ndarray,
    build: Build,
    queries: dict[str, np.ndarray],
    efs: list[int],
    iterative_scan: str,
    latency_queries: np.ndarray,
    log: Any = print,
) -> SizeResult:
    """Build (or reuse) the table of ``vectors`` and measure recall and latency on it."""
    # Named by its content: a table is reused only for the very same vectors.
    digest = hashlib.sha1(np.ascontiguousarray(vectors).tobytes()).hexdigest()[:10]
    name = f"bench_hnsw_{len(vectors)}_{build.tag}_{digest}"
    conn = await connect_raw(dsn)
    try:
        build_s, mb = await _table(conn, name, vectors, build)
        log(
            f"[{name}] index {mb:.0f} MB, " + (f"built in {build_s:.1f} s" if build_s else "reused")
        )
        result = SizeResult(len(vectors), build, build_s, mb)
        for label, qs in queries.items():
            t = time.perf_counter()
            result.recall[label] = await recall_at_10(conn, name, qs, efs, iterative_scan)
            log(
                f"[{name}] recall {label}: {result.recall[label]} ({time.perf_counter() - t:.0f} s)"
            )
    finally:
        await conn.close()
    result.latency = await _latency(dsn, name, efs, iterative_scan, latency_queries)
    log(
        f"[{name}] latency p50: "
        + ", ".join(f"{ef}: {s.p50:.2f}" for ef, s in result.latency.items())
    )
    return result


async def _latency(
    dsn: str, table: str, efs: list[int], iterative_scan: str, vectors: np.ndarray
) -> dict[int, Stat]:
    """p50/p95 of the kNN statement at each ``ef_search``, interleaved query by query."""
    sql = (
        f"SELECT id, embedding <=> $1 AS distance FROM {table}"
        " WHERE embedding IS NOT NULL ORDER BY embedding <=> $1 LIMIT 10"
    )
    conns = []
    variants = []
    warmup = min(20, len(vectors) // 4)
    try:
        for ef in efs:
            c = await connect_raw(dsn)
            conns.append(c)
            await c.execute(f"SET hnsw.ef_search = {int(ef)}")
            await c.execute("SELECT set_config('hnsw.iterative_scan', $1, false)", iterative_scan)
            await c.execute("SET enable_seqscan = off")
            stmt = await c.prepare(sql)
            variants.append(
                Variant(str(ef), f"ef_search {ef}", lambda i, s=stmt: s.fetch(vectors[i]))
            )
        stats = await interleave(variants, len(vectors), warmup, seed=len(efs), warmup_offset=0)
    finally:
        for c in conns:
            await c.close()
    return {ef: stats[str(ef)] for ef in efs}
