# ruff: noqa: E501 - the Markdown table is written as it appears
"""Ingestion strategies side by side on the shared dev set (issue 13).

Every row is one ``parrot-parents eval --strategy SPEC`` command, parsed by the CLI's own
parser and run by the CLI's own code in one process (the embedding model loads once);
each row ingests the three corpora into its own fresh collection. Its run file is then
scored by the shared scorer, ``../shared/benchmarks/score.py`` (a subprocess), which
measures characters, so what a strategy hands over cannot inflate its score.

Rows: the four free strategies (query-time modes over the package's hierarchy; the two
with a group also as ``:4``, the seed's default group: parents of 4 children, 1600
characters) and the extractive ``contextual`` variant (document name and heading path prepended to each
child's indexed text; no model). The model-backed strategies (``contextual`` with a model,
``hypothetical-questions``, ``propositions``, ``summary``) need an OpenAI-compatible
server; ``--with-model`` adds them when ``PARROT_PARENTS_LLM_BASE_URL`` is set.

    python -m benchmarks run strategy_table [--doc docs/benchmarks.md] [--runs DIR]

The table replaces the text between ``<!-- issue13-table:start -->`` and
``<!-- issue13-table:end -->`` in ``--doc``. Run files and each row's results go to
``.bench/runs/strategies/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.common import CHUNKING_EVAL, REPO_ROOT, SHARED, command, machine, replace_section

SCORER = SHARED / "score.py"

FREE = [
    "plain",
    "parent-document",
    "parent-document:4",
    "sentence-window",
    "hierarchical",
    "hierarchical:4",
    "contextual:extractive",
]
MODEL = ["contextual", "hypothetical-questions", "propositions", "summary"]
KS, BUDGETS = "1,3,5,10", "1000,2000,4000,8000"


def slug(spec: str) -> str:
    return spec.replace(":", "-").replace("=", "").replace(",", "_")


def argv(spec: str, questions: Path, corpora: Path, runs: Path) -> list[str]:
    return [
        "eval",
        "--questions",
        str(questions),
        "--corpora",
        str(corpora),
        "--out",
        str(runs / f"{slug(spec)}.jsonl"),
        "--strategy",
        spec,
        "--ks",
        KS,
        "--budgets",
        BUDGETS,
    ]


def shared_score(questions: Path, run: Path) -> dict[str, Any]:
    """The shared scorer's figures for one run file."""
    out = subprocess.run(
        [
            sys.executable,
            str(SCORER),
            "--questions",
            str(questions),
            "--run",
            str(run),
            "--ks",
            KS,
            "--budgets",
            BUDGETS,
            "--json",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)


async def run_row(spec: str, questions: Path, corpora: Path, runs: Path) -> dict[str, Any]:
    from parrot_parents.cli import eval as cli_eval
    from parrot_parents.cli.main import build_parser

    args = build_parser().parse_args(argv(spec, questions, corpora, runs))
    result = (await cli_eval.evaluate(args)).to_dict()
    result["shared"] = shared_score(questions, Path(result["run"]))
    return result


def render(results: list[dict[str, Any]], started: str, offline: bool) -> str:
    bench = "../shared/benchmarks/chunking_eval"
    lines = [
        f"Run {started} UTC; {machine()}. 276 dev questions, all-MiniLM-L6-v2, late chunking, "
        "package defaults otherwise (400-character children, hybrid search, limit 10). "
        "Scored by `../shared/benchmarks/score.py` on each run file.",
        f"Command: `{command(__name__)}`; each row is "
        f"`parrot-parents eval --questions {bench}/questions.csv --corpora {bench}/corpora "
        "--out RUN --strategy SPEC`.",
        "",
        "| strategy | maps onto | expansion ratio | model calls | recall@1 | recall@5 | recall@10 | recall@1000c | recall@2000c | recall@4000c | chars@5 | ingest s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        s, st = r["shared"], r["ingest"]["strategy"]
        lines.append(
            f"| `{r['config']['strategy']}` | {r['maps_onto']} | {st['expansion']:.2f} | {st['calls']} "
            f"| {s['recall@1']:.3f} | {s['recall@5']:.3f} | {s['recall@10']:.3f} "
            f"| {s['recall@1000c']:.3f} | {s['recall@2000c']:.3f} | {s['recall@4000c']:.3f} "
            f"| {s['chars@5']:.0f} | {r['timings']['ingest_seconds']:.0f} |"
        )
    lines += [
        "",
        "Expansion ratio: searched units per retrievable unit (the seed's definition), so "
        "`parent-document` is children per parent (760 / 59 here). `contextual:extractive` "
        "indexes, for each child, `Document: <file>` and `Section: <heading path>` above "
        "the child's text; those rows are embedded one by one, while the children of the "
        "other rows are late-chunked, so it measures context by prefix against context by "
        "late chunking. Its ingest time includes embedding its rows.",
        "",
    ]
    if offline:
        lines.append(
            "The model-backed strategies (`contextual` with a model, `hypothetical-questions`, "
            "`propositions`, `summary`) are not in this table: no model server could be "
            "reached where it was run (offline). They are tested with a scripted LLM "
            "(`tests/strategies/`); `--with-model` adds them once `PARROT_PARENTS_LLM_BASE_URL` "
            "points at a server."
        )
    return "\n".join(lines)


def maps_onto(spec: str) -> str:
    from parrot_parents.strategies.spec import parse_strategy

    parsed = parse_strategy(spec)
    if parsed.indexes_rows:
        return "indexed rows (" + ("no model" if parsed.free else "model") + ")"
    opts = parsed.retrieval_overrides()
    return f"`{opts['mode']}` expansion" if "mode" in opts else "children, no expansion"


def main(cli_args: list[str] | None = None) -> int:
    return asyncio.run(_main(cli_args))


async def _main(cli_args: list[str] | None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", type=Path, default=REPO_ROOT / "docs" / "benchmarks.md")
    ap.add_argument("--runs", type=Path, default=REPO_ROOT / ".bench" / "runs" / "strategies")
    ap.add_argument("--questions", type=Path, default=CHUNKING_EVAL / "questions.csv")
    ap.add_argument("--corpora", type=Path, default=CHUNKING_EVAL / "corpora")
    ap.add_argument("--only", default=None, help="comma-separated specs instead of the rows")
    ap.add_argument("--with-model", action="store_true", help="add the model-backed rows")
    ap.add_argument("--no-doc", action="store_true", help="print the table, leave --doc alone")
    ap.add_argument(
        "--render-only", metavar="STARTED", help="rewrite the table from the saved results"
    )
    a = ap.parse_args(cli_args)
    a.runs.mkdir(parents=True, exist_ok=True)
    specs = a.only.split(";") if a.only else [*FREE, *(MODEL if a.with_model else [])]
    started = a.render_only or dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M")
    results = []
    for i, spec in enumerate(specs, 1):
        if a.render_only:
            results.append(json.loads((a.runs / f"{slug(spec)}.json").read_text()))
            continue
        print(
            f"[{i}/{len(specs)}] parrot-parents {shlex.join(argv(spec, a.questions, a.corpora, a.runs))}",
            file=sys.stderr,
        )
        result = await run_row(spec, a.questions, a.corpora, a.runs)
        result["maps_onto"] = maps_onto(spec)
        (a.runs / f"{slug(spec)}.json").write_text(json.dumps(result, indent=2) + "\n")
        s = result["shared"]
        print(
            f"    recall@5 {s['recall@5']:.3f} recall@2000c {s['recall@2000c']:.3f} "
            f"expansion {result['ingest']['strategy']['expansion']}",
            file=sys.stderr,
        )
        results.append(result)
    offline = not (a.with_model and os.environ.get("PARROT_PARENTS_LLM_BASE_URL"))
    body = render(results, started, offline)
    print(body)
    if not a.no_doc:
        replace_section(a.doc, "issue13-table", body.rstrip())
        print(f"wrote {a.doc}", file=sys.stderr)
    return 0
