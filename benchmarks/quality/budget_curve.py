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
  so each is the CLI's own code path), each run scored at its own budget:

  - **defaults**: ``eval --budget B`` with nothing else set, so it measures whatever the
    package defaults are when it runs (:mod:`parrot_parents.loaders.defaults` and
    :data:`~parrot_parents.retrieval.options.DEFAULTS`); its label is written from those
    same values (:func:`settings`), never by hand;
  - **tuned**: the best measured configuration of the budget table (300-character
    children, ``window:1``, dense), the rest at the defaults;

* plain chunks: ``eval_table.py``'s ``children-400-plain`` row (400-character children
  embedded alone, no expansion, top 40), cut by the scorer at every budget;
* the peers of ``benchmarks/common.py`` (BM25 + dense with RRF, LangChain's
  ParentDocumentRetriever, LlamaIndex's AutoMergingRetriever), cut the same way.

Each packed curve's settings are saved beside its run files
(``.bench/runs/curve/<key>.settings.json``) and written into the figure (the PNG text
chunk :data:`FIGURE_KEY`), so ``tests/test_budget_curve.py`` can tell, without running
anything, when the figure's defaults row no longer shows the package defaults.

``--smoke N`` runs the first N questions on their corpora only, at two budgets, and writes
into ``.bench/runs/curve-smoke/`` (never ``docs/``): a check that the command works, for
smoke runs only; its numbers mean nothing.

The curves are drawn and scored by :mod:`parrot_parents.eval.plot`, with the package's
scorer (which agrees with ``../shared/benchmarks/score.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import dataclasses
import datetime as dt
import json
import os
import shutil
import struct
import sys
import time
import zlib
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
SMOKE_RUNS = REPO_ROOT / ".bench" / "runs" / "curve-smoke"
PNG = REPO_ROOT / "docs" / "budget_curve.png"
DOC = REPO_ROOT / "docs" / "benchmarks.md"
MARKER = "budget-curve"
#: The PNG text chunk holding ``{"curves": [{"key", "label", "settings"}, ...]}`` (JSON).
FIGURE_KEY = "parrot-parents budget-curve"
#: Budgets of the packed runs (one eval each) and of the single-run curves.
PACKED_BUDGETS = (1000, 2000, 3000, 4000, 6000, 8000)
SMOKE_BUDGETS = (1000, 8000)
CURVE_BUDGETS = tuple(range(1000, 8001, 500))
TABLE_BUDGETS = (1000, 2000, 4000, 8000)

#: The row that measures the package defaults: ``eval --budget B``, nothing else set.
DEFAULTS_KEY = "ours-defaults"
# (key, name, eval options without --budget). The defaults row sets nothing and is scored
# without SCORING's --search-mode, so every option is the package's own.
PACKED: list[tuple[str, str, tuple[str, ...]]] = [
    (DEFAULTS_KEY, "defaults", ()),
    (
        "ours-tuned",
        "tuned",
        ("--expand", "--child-size", "300", "--mode", "window:1", "--search-mode", "dense"),
    ),
]
PLAIN = Row(
    "children-400-plain",
    "plain 400-char chunks, dense, top 40",
    (
        "--no-expand",
        "--child-size",
        "400",
        "--limit",
        "40",
        "--no-late-chunking",
        "--strategy",
        "plain",
    ),
)
PEERS = {
    "bm25-dense": "plain 400-char chunks, BM25 + dense (RRF k=60), top 40",
    "langchain-pdr": "LangChain ParentDocumentRetriever (400/2000, k=10)",
    "llamaindex-automerge": "LlamaIndex AutoMergingRetriever (2048/512/128 tok, top 12)",
}
ALL = [k for k, _, _ in PACKED] + [PLAIN.slug, *PEERS]


def _scoring(key: str) -> list[str]:
    return common.SCORES if key == DEFAULTS_KEY else common.SCORING


def settings(key: str, budget: int = PACKED_BUDGETS[0]) -> dict[str, Any]:
    """What the packed row ``key`` runs at ``budget``: its ``eval`` command parsed by the
    CLI's parser, every option it leaves unset filled with the package default.

    Keys: the names of :mod:`parrot_parents.loaders.defaults` without ``DEFAULT_``,
    lower-case (``child_size``, ``strategy``...), and the resolved query options
    (``expand_to_parent``, ``mode``, ``limit``, ``search_mode``, ``rrf_k``...; the budget
    and the filter left out). Loads no model and touches no database.

    Raises:
        KeyError: ``key`` is not a packed row.
    """
    from parrot_parents.cli.eval import config_from_args
    from parrot_parents.cli.main import build_parser
    from parrot_parents.loaders import defaults

    options = {k: o for k, _, o in PACKED}[key]
    row = Row(key, key, (*options, "--budget", str(budget)))
    args = build_parser().parse_args(
        common.eval_argv(row, Path("q.csv"), Path("corpora"), Path("runs"), _scoring(key))
    )
    config = config_from_args(args)
    out: dict[str, Any] = {
        name.removeprefix("DEFAULT_").lower(): getattr(defaults, name) for name in defaults.__all__
    }
    out.update(
        child_size=config.child_size,
        child_overlap=config.child_overlap,
        parent_overlap=config.parent_overlap,
    )
    if config.parent_size is not None:
        out["parent_size"] = config.parent_size
        out["threshold"] = config.parent_size
    if config.parent_threshold is not None:
        out["threshold"] = config.parent_threshold
    if config.late_chunking is not None:
        out["late_chunking"] = config.late_chunking
    if config.strategy is not None:  # unset: the default strategy, as on PostgreSQL
        out["strategy"] = config.strategy
    resolved = config.options().resolve()
    for f in dataclasses.fields(resolved):
        if f.name not in ("budget", "filter"):
            value = getattr(resolved, f.name)
            out[f.name] = (
                value if value is None or isinstance(value, int | float | str) else str(value)
            )
    out["reranker"] = config.reranker
    return out


def label(name: str, s: dict[str, Any]) -> str:
    """The legend of a packed curve, written from its :func:`settings` ``s``, e.g.
    ``ours, defaults (c400, contextual:extractive, children only, hybrid, limit 20),
    packed to B``."""
    what = f"expand {s['mode']}" if s["expand_to_parent"] else "children only"
    parts = [f"c{s['child_size']}", s["strategy"], what, s["search_mode"], f"limit {s['limit']}"]
    if s.get("reranker"):
        parts.append(f"reranked by {s['reranker']}")
    return f"ours, {name} ({', '.join(parts)}), packed to B"


def figure_metadata(path: Path) -> dict[str, Any] | None:
    """The :data:`FIGURE_KEY` record of a PNG written by :func:`render`; None when the
    file has none (a figure drawn by another version of this benchmark). Plain ``zlib``
    and ``struct``: no matplotlib needed to read it."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    at = 8
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        body = data[at + 8 : at + 8 + length]
        at += 12 + length
        if kind == b"tEXt":
            name, _, text = body.partition(b"\0")
        elif kind == b"zTXt":
            name, _, rest = body.partition(b"\0")
            text = zlib.decompress(rest[1:])
        elif kind == b"iTXt":
            name, _, rest = body.partition(b"\0")
            compressed, rest = rest[0], rest[2:]
            rest = rest.split(b"\0", 2)[2]
            text = zlib.decompress(rest) if compressed else rest
        else:
            continue
        if name.decode("latin-1") == FIGURE_KEY:
            record: dict[str, Any] = json.loads(text.decode("utf-8"))
            return record
    return None


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


async def run_ours(
    key: str,
    options: tuple[str, ...],
    questions: Path,
    corpora: Path,
    runs: Path,
    budgets: tuple[int, ...],
) -> None:
    for budget in budgets:
        row = Row(f"{key}-b{budget}", key, (*options, "--budget", str(budget)))
        t = time.perf_counter()
        await run_row(row, questions, corpora, runs, _scoring(key))
        log(f"{row.slug}: {time.perf_counter() - t:.0f} s")
    # What the run files measured, for the label and the figure (and its test) to read.
    (runs / f"{key}.settings.json").write_text(json.dumps(settings(key), indent=2) + "\n")


def run_peer(
    key: str, questions_csv: Path, corpora_dir: Path, notes: dict[str, Any], runs: Path
) -> None:
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings

    questions = load_questions(questions_csv)
    corpora = load_corpora(corpora_dir)
    emb = SentenceTransformerEmbeddings()
    t = time.perf_counter()
    if key == "bm25-dense":
        fused, dense = common.bm25_dense_rrf(questions, corpora, emb, log=log)
        write_run(runs / "bm25-dense.jsonl", fused)
        write_run(runs / "dense-only-recursive400.jsonl", dense)
    elif key == "langchain-pdr":
        run, mismatches = common.langchain_parent_document(questions, corpora, emb, log=log)
        write_run(runs / "langchain-pdr.jsonl", run)
        notes[key] = {"text_mismatches": mismatches}
    elif key == "llamaindex-automerge":
        run, mismatches = common.llamaindex_auto_merging(questions, corpora, emb, log=log)
        write_run(runs / "llamaindex-automerge.jsonl", run)
        notes[key] = {"text_mismatches": mismatches}
    log(f"{key}: {time.perf_counter() - t:.0f} s")


def curves(
    questions_csv: Path, runs: Path, budgets: tuple[int, ...] = PACKED_BUDGETS
) -> tuple[list[Curve], list[dict[str, Any]]]:
    """Every curve whose run files exist, in the order of :data:`ALL`, and the figure's
    record of each (``{"key", "label", "settings"}``; settings only for packed rows).

    A packed row's label is written from the settings saved with its runs; a packed row
    without them (runs of another version of this benchmark) is left out, with a note.
    """
    questions = load_questions(questions_csv)
    n = len(questions)
    out: list[Curve] = []
    records: list[dict[str, Any]] = []
    for key, name, _ in PACKED:
        files = {b: runs / f"{key}-b{b}.jsonl" for b in budgets}
        if not all(f.exists() for f in files.values()):
            continue
        saved = runs / f"{key}.settings.json"
        if not saved.exists():
            log(f"{key}: no {saved.name} beside its runs; left out (run it again)")
            continue
        measured = json.loads(saved.read_text())
        runs_by_budget = {b: load_run(f, n) for b, f in files.items()}
        out.append(curve_from_budget_runs(label(name, measured), questions, runs_by_budget))
        records.append({"key": key, "label": out[-1].label, "settings": measured})
    singles = [(PLAIN.slug, PLAIN.label), *PEERS.items()]
    for key, text in singles:
        path = runs / f"{key}.jsonl"
        if path.exists():
            out.append(curve_from_run(text, questions, load_run(path, n), CURVE_BUDGETS))
            records.append({"key": key, "label": text})
    return out, records


def render(
    questions_csv: Path,
    notes: dict[str, Any],
    started: str,
    missing: list[str],
    *,
    runs: Path = RUNS,
    png: Path = PNG,
    doc: Path = DOC,
    budgets: tuple[int, ...] = PACKED_BUDGETS,
) -> None:
    found, records = curves(questions_csv, runs, budgets)
    questions = load_questions(questions_csv)
    draw_curves(
        found,
        png,
        title=f"Shared dev set ({len(questions)} questions): recall at a context budget",
        metadata={FIGURE_KEY: json.dumps({"curves": records}, sort_keys=True)},
    )
    dense = runs / "dense-only-recursive400.jsonl"
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
    defaults = next((r["settings"] for r in records if r["key"] == DEFAULTS_KEY), None)
    lines = [
        f"![Recall against the context budget]({png.name})",
        "",
        rows,
        "",
        'Packed rows ("packed to B") are one `parrot-parents eval --budget B` run per point '
        f"({', '.join(map(str, budgets))} characters), each scored at its own budget; "
        "every other row is one run whose ranked passages the scorer cuts at each budget. "
        "All retrievers use all-MiniLM-L6-v2 and search the three corpora together." + extra,
    ]
    if defaults is not None:
        lines += [
            "",
            "The defaults row is `parrot-parents eval --budget B` with nothing else set; "
            "the package defaults it measured: `" + json.dumps(defaults, sort_keys=True) + "`.",
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
    replace_section(doc, MARKER, "\n".join(lines))
    print(rows)


def smoke_subset(questions_csv: Path, corpora: Path, n: int, out: Path) -> tuple[Path, Path]:
    """The first ``n`` questions of ``questions_csv`` and only the corpora they ask about,
    copied under ``out``; ``(questions.csv, corpora/)``. For smoke runs only."""
    with open(questions_csv, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        fields = list(reader.fieldnames or ())
        picked = [row for _, row in zip(range(n), reader, strict=False)]
    out.mkdir(parents=True, exist_ok=True)
    q = out / "questions.csv"
    with open(q, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(picked)
    c = out / "corpora"
    shutil.rmtree(c, ignore_errors=True)
    c.mkdir()
    for corpus_id in sorted({row["corpus_id"] for row in picked}):
        shutil.copyfile(corpora / f"{corpus_id}.md", c / f"{corpus_id}.md")
    return q, c


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(_main(argv))


async def _main(argv: list[str] | None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=None, help=f"comma-separated curves to run: {ALL}")
    ap.add_argument("--render-only", action="store_true", help="redraw from saved runs")
    ap.add_argument("--questions", type=Path, default=CHUNKING_EVAL / "questions.csv")
    ap.add_argument("--corpora", type=Path, default=CHUNKING_EVAL / "corpora")
    ap.add_argument(
        "--smoke",
        type=int,
        default=None,
        metavar="N",
        help="for smoke runs only: the first N questions, their corpora, packed budgets "
        f"{SMOKE_BUDGETS}; writes into {SMOKE_RUNS.relative_to(REPO_ROOT)}/, never docs/",
    )
    a = ap.parse_args(argv)
    if a.smoke is not None and a.smoke < 1:
        ap.error(f"--smoke must be >= 1, got {a.smoke}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    runs, png, doc, budgets = RUNS, PNG, DOC, PACKED_BUDGETS
    questions, corpora = a.questions, a.corpora
    if a.smoke is not None:
        runs, budgets = SMOKE_RUNS, SMOKE_BUDGETS
        png, doc = runs / PNG.name, runs / DOC.name
        questions, corpora = smoke_subset(questions, corpora, a.smoke, runs / "data")
    runs.mkdir(parents=True, exist_ok=True)
    notes_path = runs / "notes.json"
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
                    await run_ours(key, packed[key], questions, corpora, runs, budgets)
                elif key == PLAIN.slug:
                    await run_row(PLAIN, questions, corpora, runs)
                else:
                    run_peer(key, questions, corpora, notes, runs)
            except ImportError as exc:  # a peer that cannot be installed: say so, go on
                log(f"{key} not run: {exc}")
                missing.append(f"{PEERS.get(key, key)} ({exc})")
        notes_path.write_text(json.dumps(notes, indent=2))
    render(questions, notes, started, missing, runs=runs, png=png, doc=doc, budgets=budgets)
    return 0
