"""``similarity_search`` and ``get_vector_context`` latency of this tree against another
checkout, interleaved query by query in one run.

Two worker processes answer the same queries on the same tables of the scale benchmark
(``python -m benchmarks run scale --build-only`` builds them): one runs this tree's
``parrot_parents``, the other the checkout given with ``--src``. The driver sends each
query to both, in alternating order, so the load of a shared machine falls on both alike;
each worker times the call alone (query vector given: the model is left out).

    python -m benchmarks run checkouts --src /path/to/old/checkout [--tables ...]

Writes a Markdown table (p50 and p95 per call, old and new, and the p50 change) to
``benchmarks/reports/checkouts.md`` unless ``--report`` says otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import REPORTS, child, command, commit_of, machine
from benchmarks.latency._scale.embed import LookupEmbedding

__all__ = ["main"]

DIM = 384
CALLS = ("search", "gvc")
LABELS = {
    "search": "`similarity_search_by_vector`, dense, limit 10",
    "gvc": "`get_vector_context`, parent expansion, dense",
}


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks run checkouts", description=__doc__)
    p.add_argument("--src", help="the other checkout (its parrot_parents is 'old')")
    p.add_argument("--tables", default="bench_scale_10k,bench_scale_100k")
    p.add_argument("--queries", type=int, default=300, help="measured queries per table")
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--dsn", default=None, help="default: $PARROT_PARENTS_DSN, else embedded")
    p.add_argument("--report", default=str(REPORTS / "checkouts.md"))
    p.add_argument("--worker", nargs=3, metavar=("DSN", "TABLE", "NPY"), help=argparse.SUPPRESS)
    return p.parse_args(argv)


async def _worker(dsn: str, table: str, npy: str) -> None:
    """Answer ``CALL I`` lines on stdin with the call's milliseconds on stdout."""
    from parrot_parents import Chatbot, InTableParentSearcher, PgVectorStore

    vectors = np.load(npy)
    lookup = LookupEmbedding({f"q{i}": v for i, v in enumerate(vectors)}, DIM, as_numpy=True)
    store = PgVectorStore(dsn=dsn, table=table, dimension=DIM, embedding=lookup, create=False)  # type: ignore[arg-type]
    await store.connect()
    bot = Chatbot(parent_searcher=InTableParentSearcher(store=store), expand_to_parent=True)
    loop = asyncio.get_running_loop()
    import parrot_parents

    print("ready", Path(parrot_parents.__file__).parent.parent, flush=True)
    while line := await loop.run_in_executor(None, sys.stdin.readline):
        call, index = line.split()
        i = int(index)
        start = time.perf_counter()
        if call == "search":
            found = await store.similarity_search_by_vector(vectors[i], limit=10)
        else:
            found = (await bot.get_vector_context(f"q{i}", search_mode="dense"))[0]
        elapsed = (time.perf_counter() - start) * 1000
        assert found
        print(f"{elapsed:.4f}", flush=True)
    await bot.close()
    await store.close()


async def _queries(dsn: str, table: str, n: int, seed: int) -> np.ndarray:
    """``n`` query vectors: stored children's vectors, perturbed and normalised."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            f'SELECT embedding::real[] AS v FROM "{table}" WHERE embedding IS NOT NULL'
            " ORDER BY md5(id || $1) LIMIT $2",
            str(seed),
            n,
        )
    finally:
        await conn.close()
    base = np.asarray([r["v"] for r in rows], dtype=np.float32)
    noisy = base + np.random.default_rng(seed).normal(0, 0.05, base.shape).astype(np.float32)
    return noisy / np.linalg.norm(noisy, axis=1, keepdims=True)


class _Worker:
    def __init__(self, src: str | None, dsn: str, table: str, npy: str) -> None:
        cmd, env = child(
            "benchmarks.latency.checkouts",
            ["--worker", dsn, table, npy],
            Path(src) if src else None,
        )
        self.proc = subprocess.Popen(
            cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        word, _, self.checkout = self.proc.stdout.readline().strip().partition(" ")
        assert word == "ready", word

    def call(self, call: str, i: int) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{call} {i}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _measure(args: argparse.Namespace, dsn: str, table: str) -> dict[str, dict[str, list[float]]]:
    total = args.queries + args.warmup
    vectors = asyncio.run(_queries(dsn, table, total, seed=7))
    with tempfile.TemporaryDirectory() as tmp:
        npy = str(Path(tmp) / "q.npy")
        np.save(npy, vectors)
        workers = {"old": _Worker(args.src, dsn, table, npy), "new": _Worker(None, dsn, table, npy)}
        print(f"{table}: old runs {workers['old'].checkout}, new runs {workers['new'].checkout}")
        assert workers["old"].checkout != workers["new"].checkout
        times: dict[str, dict[str, list[float]]] = {c: {"old": [], "new": []} for c in CALLS}
        try:
            for i in range(total):
                for call in CALLS:
                    order = ("old", "new") if (i + CALLS.index(call)) % 2 else ("new", "old")
                    for side in order:
                        ms = workers[side].call(call, i)
                        if i >= args.warmup:
                            times[call][side].append(ms)
        finally:
            for w in workers.values():
                w.close()
    return times


def _p(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def main(argv: list[str] | None = None) -> None:
    args = _args(argv)
    if args.worker:
        asyncio.run(_worker(*args.worker))
        return
    if not args.src:
        raise SystemExit("--src is needed: the checkout to compare against")
    from parrot_parents.embedded.server import resolve_dsn

    dsn = resolve_dsn(args.dsn)
    lines = [
        "# This tree against another checkout, interleaved",
        "",
        f"Command: `{command(__name__, sys.argv[1:] if argv is None else argv)}`; "
        f"old = {commit_of(args.src)}; {machine()}; {args.queries} measured queries per table "
        f"after {args.warmup} warm-up ones, each sent to both workers in alternating order.",
        "",
        "| table | call | old p50 ms | new p50 ms | p50 change ms | old p95 ms | new p95 ms |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    summary: dict[str, Any] = {}
    for table in [t for t in args.tables.split(",") if t]:
        times = _measure(args, dsn, table)
        for call in CALLS:
            old, new = times[call]["old"], times[call]["new"]
            row = (_p(old, 50), _p(new, 50), _p(new, 50) - _p(old, 50), _p(old, 95), _p(new, 95))
            summary[f"{table}/{call}"] = row
            lines.append(
                f"| {table} | {LABELS[call]} | {row[0]:.2f} | {row[1]:.2f} | {row[2]:+.2f} "
                f"| {row[3]:.2f} | {row[4]:.2f} |"
            )
            print(table, call, json.dumps([round(x, 3) for x in row]), flush=True)
    Path(args.report).parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {args.report}", flush=True)
