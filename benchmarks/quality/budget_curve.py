"""Recall against the context budget on the shared dev set: ours against the peers.

One command regenerates the figure ``docs/budget_curve.png``, the table between
``<!-- budget-curve:start -->`` and ``<!-- budget-curve:end -->`` in
``docs/benchmarks.md``, and every run file (``.bench/runs/curve/``, git-ignored)::

    pip install -e ".[bench]"          # matplotlib and the peers (bm25s, LangChain, LlamaIndex)
    python -m benchmarks run budget_curve  # about 15 minutes on 2 CPU cores
    python -m benchmarks run budget_curve --render-only   # redraw from the saved run files

Curves (276 questions, all-MiniLM-L6-v2, all three corpora searched together):

* ours, packed per budget: ``parrot-parents eval --budget B`` once per budget B (rows
  built and run by the eval-row code that ``eval_table`` uses, in ``benchmarks/common.py``,
  so each is the CLI's own code path), each run scored at its own budget: the default
  configuration (400-character late-chunked children, parent expansion, limit 10) and the
  best measured one (300-character children, ``window:1``, limit 20; see the budget table);
* plain chunks: ``eval_table.py``'s ``children-400-plain`` row (400-character children
  embedded alone, no expansion, top 40), cut by the scorer at every budget;
* the peers of ``benchmarks/common.py`` (BM25 + dense with RRF, LangChain's
  ParentDocumentRetriever, LlamaIndex's AutoMergingRetriever), cut the same way.

The curves are drawn and scored by :mod:`parrot_parents.eval.plot`, with the package's
scorer (which agrees with ``../shared/benchmarks/score.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.common import (
    CHUNKING_EVAL,
    REPO_ROOT,
    Row,
    command,
    machine,
    replace_section,
    run_row,
)
from parrot_parents.eval.plot import (
    Curve,
    curve_from_budget_runs,
    curve_from_run,
    curves_table,
    draw_curves,
)
from parrot_parents.eval.questions import load_corpora, load_questions
from parrot_parents.eval.scorer import load_run, write_run

RUNS = REPO_ROOT / ".bench" / "runs" / "curve"
PNG = REPO_ROOT / "docs" / "budget_curve.png"
DOC = REPO_ROOT / "docs" / "benchmarks.md"
MARKER = "budget-curve"
#: Budgets of the packed runs (one eval each) and of the single-run curves.
PACKED_BUDGETS = (1000, 2000, 3000, 4000, 6000, 8000)
CURVE_BUDGETS = tuple(range(1000, 8001, 500))
TABLE_BUDGETS = (1000, 2000, 4000, 8000)

# (key, label, eval options without --budget)
PACKED = [
    (
        "ours-default",
        "ours, c400 parent limit 10, dense, packed to B (the defaults before hybrid)",
        ("--expand", "--limit", "10", "--search-mode", "dense"),
    ),
    (
        "ours-best",
        "ours, c300 window:1 packed to B (limit 20)",
        (
            "--expand",
            "--child-size",
            "300",
            "--mode",
            "window:1",
            "--limit",
            "20",
            "--search-mode",
            "dense",
        ),
    ),
]
PLAIN = Row(
    "children-400-plain",
    "plain 400-char chunks, dense, top 40",
    ("--no-expand", "--child-size", "400", "--limit", "40", "--no-late-chunking"),
)
PEERS = {
    "bm25-dense": "plain 400-char chunks, BM25 + dense (RRF k=60), top 40",
    "langchain-pdr": "LangChain ParentDocumentRetriever (400/2000, k=10)",
    "llamaindex-automerge": "LlamaIndex AutoMergingRetriever (2048/512/128 tok, top 12)",
}
ALL = [k for k, _, _ in PACKED] + [PLAIN.slug, *PEERS]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


async def run_ours(key: str, options: tuple[str, ...], questions: Path, corpora: Path) -> None:
    for budget in PACKED_BUDGETS:
        row = Row(f"{key}-b{budget}", key, (*options, "--budget", str(budget)))
        t = time.perf_counter()
        await run_row(row, questions, corpora, RUNS)
        log(f"{row.slug}: {time.perf_counter() - t:.0f} s")


def run_peer(key: str, questions_csv: Path, corpora_dir: Path, notes: dict[str, Any]) -> None:
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings

    questions = load_questions(questions_csv)
    corpora = load_corpora(corpora_dir)
    emb = SentenceTransformerEmbeddings()
    t = time.perf_counter()
    if key == "bm25-dense":
        fused, dense = common.bm25_dense_rrf(questions, corpora, emb, log=log)
        write_run(RUNS / "bm25-dense.jsonl", fused)
        write_run(RUNS / "dense-only-recursive400.jsonl", dense)
    elif key == "langchain-pdr":
        run, mismatches = common.langchain_parent_document(questions, corpora, emb, log=log)
        write_run(RUNS / "langchain-pdr.jsonl", run)
        notes[key] = {"text_mismatches": mismatches}
    elif key == "llamaindex-automerge":
        run, mismatches = common.llamaindex_auto_merging(questions, corpora, emb, log=log)
        write_run(RUNS / "llamaindex-automerge.jsonl", run)
        notes[key] = {"text_mismatches": mismatches}
    log(f"{key}: {time.perf_counter() - t:.0f} s")


def curves(questions_csv: Path) -> list[Curve]:
    """Every curve whose run files exist, in the order of :data:`ALL`."""
    questions = load_questions(questions_csv)
    n = len(questions)
    out = []
    for key, label, _ in PACKED:
        files = {b: RUNS / f"{key}-b{b}.jsonl" for b in PACKED_BUDGETS}
        if all(f.exists() for f in files.values()):
            runs = {b: load_run(f, n) for b, f in files.items()}
            out.append(curve_from_budget_runs(label, questions, runs))
    singles = [(PLAIN.slug, PLAIN.label), *PEERS.items()]
    for key, label in singles:
        path = RUNS / f"{key}.jsonl"
        if path.exists():
            out.append(curve_from_run(label, questions, load_run(path, n), CURVE_BUDGETS))
    return out


def render(questions_csv: Path, notes: dict[str, Any], started: str, missing: list[str]) -> None:
    found = curves(questions_csv)
    draw_curves(found, PNG, title="Shared dev set (276 questions): recall at a context budget")
    questions = load_questions(questions_csv)
    dense = RUNS / "dense-only-recursive400.jsonl"
    extra = ""
    if dense.exists():
        d = curve_from_run("", questions, load_run(dense, len(questions)), TABLE_BUDGETS)
        extra = (
            " The dense half of the fusion alone, on the same chunks, scores "
            + " / ".join(f"{r:.3f}" for _, r in d.points)
            + " at "
            + " / ".join(str(b) for b in TABLE_BUDGETS)
            + " characters."
        )
    rows = curves_table(found, TABLE_BUDGETS)
    mism = ", ".join(f"{k}: {v['text_mismatches']}" for k, v in sorted(notes.items()))
    lines = [
        "![Recall against the context budget](budget_curve.png)",
        "",
        rows,
        "",
        'Packed rows ("packed to B") are one `parrot-parents eval --budget B` run per point '
        f"({', '.join(map(str, PACKED_BUDGETS))} characters), each scored at its own budget; "
        "every other row is one run whose ranked passages the scorer cuts at each budget. "
        "All retrievers use all-MiniLM-L6-v2 and search the three corpora together." + extra,
    ]
    if mism:
        lines += ["", f"Peer passages whose text is not their corpus slice: {mism}."]
    if missing:
        lines += ["", "Not run: " + ", ".join(missing) + "."]
    lines += [
        "",
        f"Machine: {machine()}. Generated {started} UTC.",
        "",
        "Regenerate the figure, this table and every run file with:",
        "",
        "```bash",
        f'pip install -e ".[bench]" && {command(__name__)}',
        "```",
    ]
    replace_section(DOC, MARKER, "\n".join(lines))
    print(rows)


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(_main(argv))


async def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help=f"comma-separated curves to run: {ALL}")
    ap.add_argument("--render-only", action="store_true", help="redraw from saved runs")
    ap.add_argument("--questions", type=Path, default=CHUNKING_EVAL / "questions.csv")
    ap.add_argument("--corpora", type=Path, default=CHUNKING_EVAL / "corpora")
    a = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    RUNS.mkdir(parents=True, exist_ok=True)
    notes_path = RUNS / "notes.json"
    notes: dict[str, Any] = json.loads(notes_path.read_text()) if notes_path.exists() else {}
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M")
    wanted = ALL if a.only is None else [k.strip() for k in a.only.split(",")]
    unknown = set(wanted) - set(ALL)
    if unknown:
        ap.error(f"unknown curve(s) {sorted(unknown)}; choose from {ALL}")
    missing: list[str] = []
    if not a.render_only:
        for key in wanted:
            log(f"running {key}")
            packed = {k: opts for k, _, opts in PACKED}
            try:
                if key in packed:
                    await run_ours(key, packed[key], a.questions, a.corpora)
                elif key == PLAIN.slug:
                    await run_row(PLAIN, a.questions, a.corpora, RUNS)
                else:
                    run_peer(key, a.questions, a.corpora, notes)
            except ImportError as exc:  # a peer that cannot be installed: say so, go on
                log(f"{key} not run: {exc}")
                missing.append(f"{PEERS.get(key, key)} ({exc})")
        notes_path.write_text(json.dumps(notes, indent=2))
    render(a.questions, notes, started, missing)
    return 0
