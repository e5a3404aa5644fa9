"""200 concurrent ``get_vector_context`` calls on one bot, and CLI wall times: today
(the baseline checkout) against this tree, side by side in one run (issue 11).

The dev corpora (``../shared/benchmarks/chunking_eval/corpora``) are ingested once into
a throwaway collection of the embedded PostgreSQL (``$PARROT_PARENTS_DATA_DIR``). Each
variant then runs in its own process (the baseline with ``PYTHONPATH=<baseline>``): one
bot, one warm-up call (model load, connection), then ``--calls`` calls at once through
``asyncio.gather``, with distinct questions from ``questions.csv`` and some repeated.
Variants alternate for ``--rounds`` rounds, so a busy moment of the shared machine hits
both. Per call: the time from the launch of all calls to its own answer.

CLI wall times (median of ``--repeats``, each a fresh process, after one untimed run that
writes the bytecode cache): ``--help``, ``ask`` on an
unknown collection, ``ask`` cold (model load included), and ``ask --server`` against a
``parrot-parents serve`` that is already warm (this tree only: today has no ``--server``).

    python -m benchmarks run scale_concurrency [--calls 200] [--rounds 2] [--repeats 3]
        --baseline <older checkout> [--out benchmarks/reports/scale_concurrency.md]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import CHUNKING_EVAL, REPORTS, child, command, commit_of

CORPORA = CHUNKING_EVAL / "corpora"
QUESTIONS = CHUNKING_EVAL / "questions.csv"
OUT = REPORTS / "scale_concurrency.md"
#: One call in this many asks a question already asked (the rest are distinct).
REPEAT_EVERY = 6
#: The environment as started: the package sets OMP_WAIT_POLICY when it loads the model
#: (it does here, to ingest), and that must not leak into today's processes.
START_ENV = dict(os.environ)


def questions(n: int) -> list[str]:
    """``n`` questions: distinct ones from ``questions.csv``, every 6th one a repeat."""
    with QUESTIONS.open(encoding="utf-8") as f:
        pool = [row["question"] for row in csv.DictReader(f)]
    out: list[str] = []
    fresh = iter(pool)
    for i in range(n):
        out.append(out[i // 2] if i % REPEAT_EVERY == REPEAT_EVERY - 1 else next(fresh))
    return out


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` in [0, 100] of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]


# -- the worker: runs in the variant's own process -----------------------------------------


async def worker(collection: str, n: int) -> dict[str, Any]:
    """One bot, one warm-up call, then ``n`` concurrent calls; the figures as a dict."""
    import parrot_parents
    from parrot_parents.bots.chatbot import Chatbot
    from parrot_parents.stores.parents import InTableParentSearcher
    from parrot_parents.stores.postgres import PgVectorStore

    store = PgVectorStore(table=collection, create=False)
    bot = Chatbot(store=store, parent_searcher=InTableParentSearcher(store=store))
    asked = questions(n)
    try:
        await bot.get_vector_context("warm up", expand_to_parent=True)
        latencies: list[float] = []

        async def one(question: str) -> None:
            await bot.get_vector_context(question, expand_to_parent=True)
            latencies.append((time.perf_counter() - launched) * 1000.0)

        launched = time.perf_counter()
        results = await asyncio.gather(*(one(q) for q in asked), return_exceptions=True)
        wall = time.perf_counter() - launched
    finally:
        await bot.close()
    errors = [r for r in results if isinstance(r, BaseException)]
    return {
        "code": commit_of(Path(parrot_parents.__file__).resolve().parent.parent),
        "calls": n,
        "distinct": len(set(asked)),
        "wall_s": wall,
        "throughput": n / wall,
        "p50_ms": percentile(latencies, 50) if latencies else None,
        "p95_ms": percentile(latencies, 95) if latencies else None,
        "errors": len(errors),
        "first_error": repr(errors[0])[:300] if errors else None,
    }


# -- the orchestrator ----------------------------------------------------------------------


#: The variants: name -> (code, extra environment). None: this tree.
Variant = tuple[Path | None, dict[str, str]]


def env_for(code: Path | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process running ``code`` (None: this tree)."""
    env = {**START_ENV, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **(extra or {})}
    env.pop("PARROT_PARENTS_SERVER", None)
    if code is not None:
        env["PYTHONPATH"] = str(code)
    else:
        env.pop("PYTHONPATH", None)
    return env


def run_worker(variant: Variant, collection: str, n: int) -> dict[str, Any]:
    code, extra = variant
    cmd, env = child(
        __name__,
        ["--worker", "--collection", collection, "--calls", str(n)],
        code,
        env_for(code, extra),
    )
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        cwd="/",
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker failed ({code}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def wall(code: Path | None, *argv: str) -> tuple[float, int]:
    """Seconds of wall time and exit code of one ``python -m parrot_parents ARGV``."""
    env = env_for(code)
    # Python keeps its bytecode, as it does for any installed package (this machine sets
    # PYTHONDONTWRITEBYTECODE, which made every run compile the checkout's modules).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "parrot_parents", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd="/",
    )
    return time.perf_counter() - started, proc.returncode


def cli(codes: dict[str, Path | None], repeats: int, *argv: str) -> dict[str, dict[str, Any]]:
    """Median wall time of ``argv`` per variant; the variants alternate run by run."""
    runs: dict[str, list[tuple[float, int]]] = {name: [] for name in codes}
    for code in codes.values():
        wall(code, *argv)  # untimed: writes the bytecode cache
    for _ in range(repeats):
        for name, code in codes.items():
            runs[name].append(wall(code, *argv))
    return {name: _summary(r) for name, r in runs.items()}


def _summary(runs: list[tuple[float, int]]) -> dict[str, Any]:
    return {
        "median_s": statistics.median(t for t, _ in runs),
        "codes": sorted({c for _, c in runs}),
    }


class Server:
    """``parrot-parents serve --port 0`` of this tree, warm once its address is printed."""

    def __enter__(self) -> str:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "parrot_parents", "serve", "--port", "0"],
            env=env_for(None),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd="/",
        )
        line = self.proc.stdout.readline()  # type: ignore[union-attr]
        match = re.search(r"on (http://[\d.]+:\d+)", line)
        if not match:
            self.__exit__()
            raise RuntimeError(f"serve did not start: {line}")
        return match.group(1)

    def __exit__(self, *exc: object) -> None:
        self.proc.send_signal(signal.SIGINT)
        self.proc.communicate(timeout=60)


async def ingest(collection: str) -> int:
    """The corpora into ``collection`` (this tree's default ingestion); children stored."""
    from parrot_parents.loaders import TextLoader
    from parrot_parents.stores.postgres import PgVectorStore

    async with PgVectorStore(table=collection) as store:
        report = await TextLoader(CORPORA).ingest(store)
    return int(getattr(report, "children", 0) or 0)


async def drop(collection: str) -> None:
    from parrot_parents.stores.postgres import PgVectorStore

    async with PgVectorStore(table=collection, create=False) as store:
        await store.drop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each CLI command")
    ap.add_argument("--baseline", type=Path, required=True, help="the older checkout")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--collection", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(asyncio.run(worker(args.collection, args.calls))))
        return

    collection = f"bench_scale_{uuid.uuid4().hex[:8]}"
    bot = f"scale_{uuid.uuid4().hex[:6]}"
    variants: dict[str, Variant] = {
        "today": (args.baseline, {}),
        # Today's code with the OpenMP wait policy this tree sets: what batching adds alone.
        "today, OMP passive": (args.baseline, {"OMP_WAIT_POLICY": "PASSIVE"}),
        "ours": (None, {}),
    }
    load = os.getloadavg()[0]
    t = time.perf_counter()
    asyncio.run(ingest(collection))
    ingest_s = time.perf_counter() - t
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    clis: dict[str, dict[str, Any]] = {"today": {}, "ours": {}}
    try:
        for r in range(args.rounds):
            for name, variant in variants.items():
                result = run_worker(variant, collection, args.calls)
                runs[name].append(result)
                print(f"round {r + 1} {name}: {result}", flush=True)
        ask = ["ask", "What did the president say about insulin?", "--collection", collection]
        codes = {"today": args.baseline, "ours": None}
        unknown = ["ask", "q", "--collection", "no_such_collection_here"]
        for command, argv in (("--help", ["--help"]), ("unknown collection", unknown)):
            for name, got in cli(codes, args.repeats, *argv).items():
                clis[name][command] = got
        for name, got in cli(codes, args.repeats, *ask).items():
            clis[name]["ask (cold)"] = got
        print(f"cli: {clis}", flush=True)
        wall(None, "migrate")
        wall(None, "bots", "add", bot, "--collection", collection)
        try:
            with Server() as url:
                wall(None, *ask, "--server", url, "--bot", bot)  # the server's first search
                clis["ours"]["ask --server (warm)"] = cli(
                    {"ours": None}, args.repeats, *ask[:2], "--server", url, "--bot", bot
                )["ours"]
        finally:
            wall(None, "bots", "remove", bot)
    finally:
        asyncio.run(drop(collection))
    report = render(args, runs, clis, ingest_s, load)
    args.out.write_text(report, encoding="utf-8")
    print(report)


def render(
    args: argparse.Namespace,
    runs: dict[str, list[dict[str, Any]]],
    clis: dict[str, dict[str, Any]],
    ingest_s: float,
    load: float,
) -> str:
    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[name])

    ratio = med("ours", "throughput") / med("today", "throughput")
    passive = "today, OMP passive"
    ratio_passive = med("ours", "throughput") / med(passive, "throughput")
    first = runs["ours"][0]
    lines = [
        "# 200 concurrent calls and CLI wall times: today against this tree",
        "",
        f"Machine: {os.cpu_count()} cores shared with other jobs (load average "
        f"{load:.1f} at the start); all-MiniLM-L6-v2 on CPU (torch); embedded PostgreSQL.",
        f"Corpora: the dev corpora ({', '.join(sorted(p.name for p in CORPORA.glob('*.md')))}), "
        f"ingested once ({ingest_s:.0f} s) into a throwaway collection with this tree's "
        "default ingestion; both variants read the same table.",
        f"Load: {args.calls} `get_vector_context(q, expand_to_parent=True)` calls at once "
        f"(`asyncio.gather`) on one bot, {first['distinct']} distinct questions from "
        "questions.csv (every 6th call repeats an earlier one), after one warm-up call; "
        "latency is from the launch to each answer. Each variant runs in its own process "
        f"(today: `PYTHONPATH=<older checkout>`), alternating for {args.rounds} round(s).",
        "",
        "Command: `"
        + command(
            __name__,
            [
                *("--calls", str(args.calls), "--rounds", str(args.rounds)),
                *("--repeats", str(args.repeats)),
            ],
        )
        + "`",
        "",
        "| variant | round | throughput (calls/s) | p50 ms | p95 ms | errors | wall s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name in runs:
        for i, r in enumerate(runs[name], 1):
            lines.append(
                f"| {name} | {i} | {r['throughput']:.1f} | {r['p50_ms']:.0f} | "
                f"{r['p95_ms']:.0f} | {r['errors']} | {r['wall_s']:.2f} |"
            )
    lines += [
        "",
        f"Throughput, median of rounds: today {med('today', 'throughput'):.1f} calls/s, "
        f"ours {med('ours', 'throughput'):.1f} calls/s: **{ratio:.2f}×** (target ≥ 3×); "
        f"p95 today {med('today', 'p95_ms'):.0f} ms, ours {med('ours', 'p95_ms'):.0f} ms; "
        "errors "
        + ", ".join(f"{name} {sum(r['errors'] for r in runs[name])}" for name in runs)
        + ".",
        "",
        f"What each change gives: today's code with `OMP_WAIT_POLICY=PASSIVE` (which this "
        f"tree sets before torch loads) runs {med(passive, 'throughput'):.1f} calls/s "
        f"({med(passive, 'throughput') / med('today', 'throughput'):.2f}× today); "
        f"micro-batched query embedding on top of it: {ratio_passive:.2f}×.",
        "",
        f"## CLI wall times (median of {args.repeats} fresh processes, today and ours "
        "alternating, seconds)",
        "",
        "Each command first runs once untimed per checkout, with Python's bytecode cache on "
        "(this machine sets `PYTHONDONTWRITEBYTECODE`; an installed package has its cache).",
        "",
        "| command | today | ours |",
        "|---|---:|---:|",
    ]
    for cli_command in ("--help", "unknown collection", "ask (cold)", "ask --server (warm)"):
        cells = []
        for name in ("today", "ours"):
            got = clis[name].get(cli_command)
            cells.append("n/a" if got is None else f"{got['median_s']:.2f}")
        lines.append(f"| `{cli_command}` | {' | '.join(cells)} |")
    lines += [
        "",
        "`ask --server` asks a `parrot-parents serve` of this tree that was started (and had "
        "answered once) before the timed runs; today has no `--server`, so every `ask` loads "
        "the model. Exit codes: "
        + "; ".join(f"{n} {c}: {v['codes']}" for n in clis for c, v in clis[n].items())
        + ".",
    ]
    for name in runs:
        errs = [r["first_error"] for r in runs[name] if r["first_error"]]
        if errs:
            lines.append(f"First error ({name}): `{errs[0]}`")
    lines.append(f"Code run: today {runs['today'][0]['code']}, ours {first['code']}.")
    return "\n".join(lines) + "\n"
