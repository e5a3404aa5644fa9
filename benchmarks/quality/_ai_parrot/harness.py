# ruff: noqa: E501 - the Markdown tables are written as they appear
"""The harness every row of the ``ai_parrot`` benchmark runs in: a row, its run file, its
score by the shared scorer, and the table line it becomes."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import REPO_ROOT, SHARED

BUDGETS = (1000, 2000, 4000)
RUNS = REPO_ROOT / ".bench" / "runs" / "ai_parrot"

Passage = tuple[str, int, int]


@dataclass
class Route:
    """One row: how to build a bot-like object and how to ask it one question.

    ``setup(corpora)`` ingests (or reuses an ingest) and returns the bot-like object,
    warm (one untimed call made: the first timed one pays no first-call costs);
    ``query(bot, question)`` returns the passages handed to the LLM in order, as corpus
    spans ``(corpus_id, start, end)``. Optional: ``embed(bot, question)``, the query
    embedding alone (for the "query vector" column); ``close(bot)``; ``notes(bot)``, one
    line for the report (counters the row kept).
    """

    name: str
    setup: Callable[[Mapping[str, str]], Awaitable[Any]]
    query: Callable[[Any, str], Awaitable[list[Passage]]]
    embed: Callable[[Any, str], Awaitable[Any]] | None = None
    close: Callable[[Any], Awaitable[None]] | None = None
    notes: Callable[[Any], str] | None = None


@dataclass
class RowResult:
    """What the table shows of one row."""

    name: str
    recall: dict[int, float]
    empty: int
    questions: int
    p50_ms: float
    vector_ms: float | None
    notes: str = ""
    run_path: Path | None = None


def p50(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else 0.0


def score(questions_csv: Path, run_path: Path) -> dict[str, float]:
    """The shared scorer's metrics of a run file (``--json``)."""
    out = subprocess.run(
        [
            sys.executable,
            str(SHARED / "score.py"),
            "--questions",
            str(questions_csv),
            "--run",
            str(run_path),
            "--budgets",
            ",".join(map(str, BUDGETS)),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return json.loads(out)


def write_run(path: Path, run: Mapping[int, Sequence[Passage]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for qid, passages in run.items():
            f.write(
                json.dumps(
                    {
                        "qid": qid,
                        "passages": [
                            {"corpus_id": c, "start": s, "end": e} for c, s, e in passages
                        ],
                    }
                )
                + "\n"
            )


async def run_route(
    route: Route,
    questions: Sequence[Any],
    questions_csv: Path,
    corpora: Mapping[str, str],
    slug: str,
) -> RowResult:
    """Set the row up (``setup`` returns it warm), ask every question, score its run."""
    print(f"[{route.name}] setup", flush=True)
    bot = await route.setup(corpora)
    try:
        run: dict[int, list[Passage]] = {}
        latencies: list[float] = []
        for q in questions:
            started = time.perf_counter()
            passages = await route.query(bot, q.question)
            latencies.append((time.perf_counter() - started) * 1000.0)
            run[q.qid] = passages
        vector: list[float] = []
        if route.embed is not None:
            for q in questions:
                started = time.perf_counter()
                await route.embed(bot, q.question)
                vector.append((time.perf_counter() - started) * 1000.0)
        notes = route.notes(bot) if route.notes is not None else ""
    finally:
        if route.close is not None:
            await route.close(bot)
    path = RUNS / f"{slug}.jsonl"
    write_run(path, run)
    metrics = score(questions_csv, path)
    result = RowResult(
        route.name,
        {b: float(metrics[f"recall@{b}c"]) for b in BUDGETS},
        sum(1 for q in questions if not run.get(q.qid)),
        len(questions),
        p50(latencies),
        p50(vector) if vector else None,
        notes,
        path,
    )
    print(f"[{route.name}] {result}", flush=True)
    return result


def table(rows: Sequence[RowResult]) -> list[str]:
    lines = [
        "| row | recall@1000c | recall@2000c | recall@4000c | empty contexts | p50 ms | query vector ms |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = " | ".join(f"{r.recall[b]:.3f}" for b in BUDGETS)
        vector = f"{r.vector_ms:.1f}" if r.vector_ms is not None else "–"
        lines.append(
            f"| {r.name} | {cells} | {r.empty} of {r.questions} | {r.p50_ms:.1f} | {vector} |"
        )
    return lines


def counts_text(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{v} {k}" for k, v in counts.items()) or "none"


def version_of(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"
