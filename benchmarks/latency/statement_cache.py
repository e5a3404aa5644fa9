"""Searches cycling through many values that have statements of their own, against the
number of statements each read connection keeps prepared.

A partition key's value (and a filter key's value with a graph of its own) is searched by
a statement holding the value, so its own graphs serve it. Each read connection keeps
``statement_cache_size`` statements prepared (asyncpg's default 100; the product's
``READ_STATEMENT_CACHE``); a search whose statement was let go prepares and plans it
again. On a collection with a partition key of ``--values`` values, each of them is
searched in turn, dense, query vector given, in cycles of ``--cycles`` values (50 fit
either cache); every cycle is run ``--rounds`` times and the first round is left out.
The stores with each cache size run in alternation, ``--repeat`` times each. Per cell:
p50 and p90 in ms. The server's memory for the statements a connection keeps (the
``CachedPlan*`` contexts of ``pg_backend_memory_contexts``) is reported beside them.

    python -m benchmarks run statement_cache             # builds the collection, ~2 min
    python -m benchmarks run statement_cache --values 300 --cycles 50,300
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document

from benchmarks.common import REPORTS, command, commit_of, machine
from parrot_parents.embedded.server import resolve_dsn
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.connections.read_pool import READ_STATEMENT_CACHE

REPORT = REPORTS / "statement_cache.md"
DIM = 384
#: asyncpg's own ``statement_cache_size``.
ASYNCPG_DEFAULT = 100
MEMORY = (
    "SELECT count(*), coalesce(sum(total_bytes), 0) FROM pg_backend_memory_contexts"
    " WHERE name = 'CachedPlanSource'"
)
MEMORY_ALL = (
    "SELECT coalesce(sum(total_bytes), 0) FROM pg_backend_memory_contexts"
    " WHERE name IN ('CachedPlanSource', 'CachedPlanQuery', 'CachedPlan')"
)


def _store(dsn: str, table: str, cache: int | None) -> PgVectorStore:
    """The collection's store; ``cache``: the read connections' statement cache size, or
    None for the product's default."""
    kw: dict[str, Any] = {}
    if cache is not None:
        kw["engine_kwargs"] = {"connect_args": {"statement_cache_size": cache}}
    return PgVectorStore(dsn=dsn, table=table, dimension=DIM, partition_key="tenant", **kw)


async def _build(dsn: str, table: str, values: int, per: int) -> np.ndarray:
    """The collection (reused when it holds ``values * per`` children) and its vectors."""
    n = values * per
    vectors = np.random.default_rng(1).standard_normal((n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    async with _store(dsn, table, None) as store:
        rows = await store.read_pool.run(
            lambda c: c.fetch_with(f"SELECT count(*) FROM {store.qualified_name}", (), ()),
            action="count",
        )
        if int(rows[0][0]) == n:
            return vectors
        await store.drop()
    async with _store(dsn, table, None) as store:
        batch = []
        for i in range(n):
            meta = {
                "document_id": f"d{i}",
                "is_chunk": True,
                "start_index": 0,
                "end_index": 10,
                "tenant": f"t{i % values}",
            }
            doc = Document(id=f"d{i}#c:0-10", page_content=f"row {i}", metadata=meta)
            batch.append((f"d{i}", [doc], [vectors[i]], None))
        await store.replace_documents(batch)
    return vectors


async def _cycle(store: PgVectorStore, query: list[float], values: int, rounds: int) -> list[float]:
    """ms of each search of ``values`` values in turn, ``rounds`` times, the first left out."""
    times: list[float] = []
    for r in range(rounds):
        for v in range(values):
            start = time.perf_counter()
            await store.similarity_search_by_vector(query, limit=10, filter={"tenant": f"t{v}"})
            if r:
                times.append((time.perf_counter() - start) * 1000)
    return times


async def _memory(store: PgVectorStore) -> tuple[int, float]:
    """Statements one read connection keeps, and the MB the server holds for them."""

    async def read(conn: Any) -> tuple[int, float]:
        count = await conn.fetch_with(MEMORY, (), ())
        total = await conn.fetch_with(MEMORY_ALL, (), ())
        return int(count[0][0]), float(total[0][0]) / 2**20

    found: tuple[int, float] = await store.read_pool.run(read, action="memory")
    return found


async def run(args: argparse.Namespace) -> str:
    dsn = resolve_dsn(args.dsn)
    table = f"bench_statement_cache_{args.values}"
    vectors = await _build(dsn, table, args.values, args.per)
    query = vectors[0].tolist()
    cycles = [int(c) for c in args.cycles.split(",")]
    caches: list[int | None] = [ASYNCPG_DEFAULT, None]
    times: dict[tuple[int | None, int], list[float]] = {}
    memory: dict[int | None, list[tuple[int, float]]] = {c: [] for c in caches}
    for rep in range(args.repeat):
        for cache in caches:
            async with _store(dsn, table, cache) as store:
                for cycle in cycles:
                    got = await _cycle(store, query, min(cycle, args.values), args.rounds)
                    times.setdefault((cache, cycle), []).extend(got)
                    print(
                        f"[{rep}] cache {cache or 'default'}, cycle {cycle}: "
                        f"p50 {statistics.median(got):.2f} ms",
                        flush=True,
                    )
                memory[cache].append(await _memory(store))
    lines = [
        "# Statements kept per read connection",
        "",
        f"_{datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {machine()}; {commit_of()}. "
        f"Command: `{command(__name__, args.argv)}`._",
        "",
        f"`{table}`: {args.values * args.per:,} children, a partition key of "
        f"{args.values} values ({args.per} children each, each value with its own graph). "
        f"Dense search, query vector given; each value searched in turn, every cycle "
        f"{args.rounds} times, the first left out; the two cache sizes in alternation, "
        f"{args.repeat} times each.",
        "",
        "| statements kept per connection | "
        + " | ".join(f"cycle of {c} values: p50 / p90 ms" for c in cycles)
        + " | statements kept on one connection after the runs, server MB for them |",
        "|---|" + "---:|" * (len(cycles) + 1),
    ]
    for cache in caches:
        label = (
            f"{ASYNCPG_DEFAULT} (asyncpg's default)"
            if cache is not None
            else f"{READ_STATEMENT_CACHE} (the product's)"
        )
        cells = []
        for cycle in cycles:
            t = times[(cache, cycle)]
            cells.append(f"{statistics.median(t):.2f} / {float(np.percentile(t, 90)):.2f}")
        kept = ", ".join(f"{n} and {mb:.0f} MB" for n, mb in memory[cache])
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {kept} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--values", type=int, default=300)
    ap.add_argument("--per", type=int, default=40, help="children per value")
    ap.add_argument("--cycles", default="50,300", help="values per cycle, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--dsn", default=None, help="default: $PARROT_PARENTS_DSN, else embedded")
    ap.add_argument("--report", default=str(REPORT), help="'none': print only")
    args = ap.parse_args(argv)
    args.argv = list(argv or [])
    text = asyncio.run(run(args))
    print(text)
    if args.report != "none":
        Path(args.report).write_text(text)
    return 0
