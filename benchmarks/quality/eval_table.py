"""Regenerate the retrieval tables of ``docs/benchmarks.md`` with ``parrot-parents eval``.

Every row is one ``parrot-parents eval`` command line: it is parsed by the CLI's own parser
and run by the CLI's own code (:func:`parrot_parents.cli.eval.evaluate`), in one process so
the embedding model loads once. Each row ingests the corpora into its own fresh collection.
Run files and each row's results (``<slug>.json``) go to ``.bench/runs/`` (git-ignored).
The table replaces the text between ``<!-- <table>:start -->`` and ``<!-- <table>:end -->``
in the document, so every other section of the file survives; a table missing from the
file is appended.

Usage (from the repository root, with the virtual environment active)::

    python -m benchmarks run eval_table                 # every table, default paths
    python -m benchmarks run eval_table --table issue3  # one table
    python -m benchmarks run eval_table --list          # the rows and their commands
    python -m benchmarks run eval_table --render-only   # rewrite from the saved results

The question set and corpora default to ``../shared/benchmarks/chunking_eval``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import (
    CHUNKING_EVAL,
    REPO_ROOT,
    Row,
    command,
    eval_argv,
    machine,
    replace_section,
    run_row,
)

DEFAULT_DOC = REPO_ROOT / "docs" / "benchmarks.md"
DEFAULT_RUNS = REPO_ROOT / ".bench" / "runs"
COMMAND = command(__name__)


@dataclass(frozen=True)
class Table:
    """A table of rows, written between its markers in the document."""

    name: str
    title: str
    rows: tuple[Row, ...]
    notes: str = ""


def _children_rows() -> list[Row]:
    rows = []
    for size in (250, 400):
        for late in (False, True):
            rows.append(
                Row(
                    f"children-{size}-{'late' if late else 'plain'}",
                    f"children only, {size}-char children, top 40",
                    (
                        "--no-expand",
                        "--child-size",
                        str(size),
                        "--limit",
                        "40",
                        "--late-chunking" if late else "--no-late-chunking",
                    ),
                )
            )
    return rows


def _expansion_rows() -> list[Row]:
    rows = []
    for parent in (2000, 4000):
        for late in (False, True):
            rows.append(
                Row(
                    f"expand-400-{parent}-{'late' if late else 'plain'}",
                    f"expansion, 400-char children, {parent}-char parents, k=10",
                    (
                        "--expand",
                        "--child-size",
                        "400",
                        "--parent-size",
                        str(parent),
                        "--limit",
                        "10",
                        "--late-chunking" if late else "--no-late-chunking",
                    ),
                )
            )
    return rows


ISSUE3 = Table(
    name="issue3-table",
    title="Children only and parent expansion, late chunking off and on",
    rows=(*_children_rows(), *_expansion_rows()),
    notes=(
        "Children-only rows retrieve the top 40 children (the peers' rule for plain chunks), "
        "so the budget columns have enough text to fill 8000 characters; recall@5, "
        "precision@5, iou@5 and chars@5 use the first 5 of them. Children are cut inside "
        "the loader's default 4000-character parent_chunks (200 overlap; every corpus is "
        "longer than the 16000-character threshold), which are also the late-chunking "
        "context. Expansion rows keep the top 10 children (LangChain's k=10) and hand over "
        "their parents, each parent once, at the rank of its best child; `--parent-size N` "
        "sets both the parent_chunk size and the 3-level threshold to N characters, so all "
        "three corpora (40-119 kB) are cut into N-character parent_chunks (200 overlap)."
    ),
)

TABLES: dict[str, Table] = {"issue3": ISSUE3}

#: (retriever, recall@5, recall@1000c, recall@2000c, recall@4000c, chars@5) from issue 3.
PEER_ROWS = [
    ("plain 300-char chunks, no overlap, top 40", "0.733", "0.685", "0.772", "0.852", "—"),
    ("plain 400-char chunks, no overlap, top 40", "0.749", "0.654", "0.773", "0.878", "1692"),
    ("plain 600-char chunks, no overlap, top 40", "0.800", "0.609", "0.773", "0.881", "—"),
    (
        "LangChain ParentDocumentRetriever (child 400, parent 2000, k=10)",
        "0.946",
        "0.355",
        "0.707",
        "0.837",
        "7463",
    ),
    (
        "LlamaIndex AutoMergingRetriever (2048/512/128 tokens, top 12)",
        "0.879",
        "0.364",
        "0.572",
        "0.802",
        "5057",
    ),
]

PEERS = "\n".join(
    [
        "Peer figures from issue 3, measured on the same dev set with the same model",
        "(all-MiniLM-L6-v2) and the same scorer:",
        "",
        "| retriever (dev set) | recall@5 | recall@1000c | recall@2000c | recall@4000c | chars@5 |",
        "|---|---:|---:|---:|---:|---:|",
        *("| " + " | ".join(r) + " |" for r in PEER_ROWS),
        "",
    ]
)


def display_argv(row: Row) -> str:
    """The row's command as a user would type it from the repository root."""
    bench = "../shared/benchmarks/chunking_eval"
    argv = eval_argv(
        row, Path(f"{bench}/questions.csv"), Path(f"{bench}/corpora"), Path(".bench/runs")
    )
    return "parrot-parents " + shlex.join(argv)


def _f(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}"


def render(
    table: Table,
    results: Sequence[tuple[Row, dict[str, Any]]],
    started: str,
    load: tuple[Sequence[float], Sequence[float]],
) -> str:
    """Markdown of one table with its notes, peers, machine and command.

    ``results`` pairs each row with its :meth:`EvalResult.to_dict`.
    """
    head = (
        "| configuration | late chunking | recall@5 | precision@5 | iou@5 | recall@1000c "
        "| recall@2000c | recall@4000c | recall@8000c | chars@5 | query p50 / p95 ms "
        "| ingest s (tokens/s) |"
    )
    lines = [f"### {table.title}", "", head, "|---|---|" + "---:|" * 10]
    for row, r in results:
        m, t = r["metrics"], r["timings"]
        lines.append(
            f"| {row.label} | {'on' if r['ingest']['late_chunking'] else 'off'} "
            f"| {_f(m['recall@5'])} | {_f(m['precision@5'])} | {_f(m['iou@5'])} "
            f"| {_f(m['recall@1000c'])} | {_f(m['recall@2000c'])} | {_f(m['recall@4000c'])} "
            f"| {_f(m['recall@8000c'])} | {m['chars@5']:.0f} "
            f"| {t['query_p50_ms']:.1f} / {t['query_p95_ms']:.1f} "
            f"| {t['ingest_seconds']:.1f} ({t['ingest_tokens_per_second']:.0f}) |"
        )
    first = results[0][1] if results else None
    corpus = ""
    if first is not None:
        corpus = (
            f" Corpus: {first['ingest']['corpora']} files, "
            f"{first['ingest']['characters']} characters, "
            f"{first['timings']['ingest_tokens']} tokens of the embedding model's "
            f"tokenizer; {first['metrics']['questions']} questions."
        )
    fallbacks = sum(r["diagnostics"]["fallbacks"] for _, r in results)
    mismatches = sum(r["diagnostics"]["text_mismatches"] for _, r in results)
    checks = (
        f"Checks: {mismatches} passage(s) whose text differs from its corpus span, "
        f"{fallbacks} question(s) with a pipeline fallback, over all rows."
    )
    load_note = (
        f"Load average (1, 5, 15 min) {_load(load[0])} at the start and "
        f"{_load(load[1])} at the end: the machine is shared, so timings are "
        "indicative."
    )
    lines += [
        "",
        table.notes + corpus,
        "",
        checks,
        "",
        "Query times are the wall time of `Chatbot.retrieve` per question (query embedding, "
        "search and expansion included), after one untimed warm-up query. Ingest time "
        "covers splitting, embedding and writing (model loading excluded); tokens/s divides "
        "the corpus's token count by it, the same count for every row.",
        "",
        PEERS,
        f"Machine: {machine()}. Generated {started} UTC. {load_note}",
        "",
        "Regenerate every row with:",
        "",
        "```bash",
        COMMAND,
        "```",
        "",
        "<details><summary>The command behind each row</summary>",
        "",
        "```bash",
        *(display_argv(row) for row, _ in results),
        "```",
        "",
        "</details>",
    ]
    return "\n".join(lines)


def _load(values: tuple[float, ...]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


async def build(table: Table, questions: Path, corpora: Path, runs: Path) -> str:
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M")
    load_before = os.getloadavg()
    results = []
    for i, row in enumerate(table.rows, 1):
        print(f"[{i}/{len(table.rows)}] {display_argv(row)}", file=sys.stderr)
        result = (await run_row(row, questions, corpora, runs)).to_dict()
        (runs / f"{row.slug}.json").write_text(json.dumps(result, indent=2) + "\n")
        m = result["metrics"]
        print(
            f"    recall@5 {m['recall@5']:.3f}  recall@2000c {m['recall@2000c']:.3f}  "
            f"ingest {result['timings']['ingest_seconds']:.1f} s",
            file=sys.stderr,
        )
        results.append((row, result))
    load = (load_before, os.getloadavg())
    (runs / f"{table.name}.meta.json").write_text(json.dumps({"started": started, "load": load}))
    return render(table, results, started, load)


def rerender(table: Table, runs: Path) -> str:
    """The table from the results saved by the last full run (no evaluation)."""
    meta = json.loads((runs / f"{table.name}.meta.json").read_text())
    results = [(row, json.loads((runs / f"{row.slug}.json").read_text())) for row in table.rows]
    return render(table, results, meta["started"], meta["load"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--table",
        choices=sorted(TABLES),
        action="append",
        help="table to regenerate (repeatable; default: all)",
    )
    ap.add_argument("--questions", type=Path, default=CHUNKING_EVAL / "questions.csv")
    ap.add_argument("--corpora", type=Path, default=CHUNKING_EVAL / "corpora")
    ap.add_argument("--doc", type=Path, default=DEFAULT_DOC, help="document to update")
    ap.add_argument("--runs", type=Path, default=DEFAULT_RUNS, help="directory of run files")
    ap.add_argument("--list", action="store_true", help="print the rows' commands and exit")
    ap.add_argument(
        "--render-only",
        action="store_true",
        help="rewrite the tables from the results saved in --runs, running nothing",
    )
    a = ap.parse_args(argv)
    tables = [TABLES[name] for name in (a.table or sorted(TABLES))]
    if a.list:
        for table in tables:
            for row in table.rows:
                print(display_argv(row))
        return 0
    if a.render_only:
        for table in tables:
            replace_section(a.doc, table.name, rerender(table, a.runs))
        return 0
    if not a.questions.is_file():
        print(f"no question set at {a.questions}", file=sys.stderr)
        return 1
    from parrot_parents.cli.main import _quiet

    _quiet()
    a.runs.mkdir(parents=True, exist_ok=True)
    for table in tables:
        body = asyncio.run(build(table, a.questions, a.corpora, a.runs))
        replace_section(a.doc, table.name, body)
        print(f"wrote {table.name} to {a.doc}", file=sys.stderr)
    return 0
