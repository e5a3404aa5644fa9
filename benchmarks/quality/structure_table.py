# ruff: noqa: E501 - the Markdown tables are written as they appear
"""Section parents against fixed parent_chunks, measured side by side (issue 12).

One run, every other setting equal (child size 400, late chunking, the package's search
defaults, the same model): each of three ingests

* **fixed**: today's 4,000-character parent_chunks (200 overlap), structure ignored;
* **sections**: parents follow the Markdown heading tree (``section_parents=True``);
* **sections + preamble**: the same, each child embedded (in the late-chunking pass) and
  lexically indexed with its title and section path (``preamble=True``);

on ``../shared/benchmarks/structured_eval`` (the dev wikitexts with Markdown headings, 144
questions) and on the full dev set ``../shared/benchmarks/chunking_eval`` (276 questions;
its corpora have no Markdown headings, so structure can only change little there). Each
question is asked at budgets of 1000, 2000 and 4000 characters with parent expansion
(``expand_to_parent=True``, ``mode=parent``, limit 20: hits first, then their parents or
windows inside the budget), where parents matter; on structured_eval also with the package
defaults (children only), where only the late-chunking context and the preamble can
change anything. (The dev set is asked with parent expansion only, to keep the run short on
a shared 2-core machine.)
Runs are scored by the shared scorer, ``../shared/benchmarks/score.py`` (imported, never
modified); the "rest of the dev set" rows are the dev questions outside wikitexts.

    python -m benchmarks run structure_table [--doc docs/benchmarks.md]

The table replaces the text between ``<!-- issue12-table:start -->`` and
``<!-- issue12-table:end -->`` in ``--doc``. Run files go to ``.bench/runs/structure/``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from benchmarks.common import REPO_ROOT, SHARED, command, replace_section
from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.eval.runner import fresh_collection_name, load_corpora
from parrot_parents.eval.scorer import write_run
from parrot_parents.loaders import TextLoader
from parrot_parents.loaders.structure.markdown import read_markdown
from parrot_parents.stores.parents import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore

BUDGETS = (1000, 2000, 4000)
CONFIGS: list[tuple[str, dict[str, bool]]] = [
    ("fixed 4,000-char parent_chunks", {"section_parents": False, "preamble": False}),
    ("section parents", {"section_parents": True, "preamble": False}),
    ("section parents + preamble", {"section_parents": True, "preamble": True}),
]
QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("defaults (children)", {}),
    ("parent expansion, limit 20", {"expand_to_parent": True, "mode": "parent", "limit": 20}),
]


def _scorer() -> Any:
    spec = importlib.util.spec_from_file_location("shared_score", SHARED / "score.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _ingest(
    emb: Any, corpora: dict[str, str], options: dict[str, bool]
) -> tuple[PgVectorStore, float]:
    store = PgVectorStore(table=fresh_collection_name(), embedding=emb)
    loader = TextLoader(embedding=emb, **options)
    docs = [
        Document(
            page_content=t,
            metadata={"document_id": c, "structure": read_markdown(t).to_dict()},
        )
        for c, t in corpora.items()
    ]
    t0 = time.perf_counter()
    await loader.chunk_documents(docs, vector_store=store)
    return store, time.perf_counter() - t0


def _score(
    scorer: Any, questions: list[Any], run: dict[int, list[Any]], keep: list[int] | None, b: int
) -> float:
    """recall@Bc by the shared scorer, over all questions or the rows ``keep``."""
    if keep is None:
        return scorer.score(questions, run, [5], [b])[f"recall@{b}c"]
    sub_q = [questions[i] for i in keep]
    sub_run = {j: run[i] for j, i in enumerate(keep) if i in run}
    return scorer.score(sub_q, sub_run, [5], [b])[f"recall@{b}c"]


async def dataset(
    name: str,
    bench: Path,
    emb: Any,
    scorer: Any,
    runs: Path,
    subsets: dict[str, list[int] | None],
    queries: list[tuple[str, dict[str, Any]]],
) -> list[str]:
    questions_csv = bench / "questions.csv"
    shared_q = scorer.load_questions(str(questions_csv))
    from parrot_parents.eval.questions import load_questions

    questions = load_questions(questions_csv)
    corpora = load_corpora(bench / "corpora")
    lines = []
    for cfg_label, options in CONFIGS:
        store, ingest_s = await _ingest(emb, corpora, options)
        bot = Chatbot(
            store=store, parent_searcher=InTableParentSearcher(store=store), owns_store=False
        )
        try:
            for q_label, q_options in queries:
                runs_by_budget = {}
                for b in BUDGETS:
                    run: dict[int, list[tuple[str, int, int]]] = {}
                    for q in questions:
                        r = await bot.retrieve(q.question, budget=b, **q_options)
                        run[q.qid] = [
                            (p.document_id, p.start_index, p.end_index) for p in r.passages
                        ]
                    runs_by_budget[b] = run
                    slug = f"{name}-{cfg_label.split()[0]}{'-pre' if options['preamble'] else ''}-{q_label.split()[0]}-{b}"
                    write_run(runs / f"{slug}.jsonl", run)
                for subset, keep in subsets.items():
                    cells = [
                        f"{_score(scorer, shared_q, runs_by_budget[b], keep, b):.3f}"
                        for b in BUDGETS
                    ]
                    lines.append(
                        f"| {subset} | {q_label} | {cfg_label} | {' | '.join(cells)} | {ingest_s:.1f} |"
                    )
                    print(lines[-1], flush=True)
        finally:
            await store.drop()
            await store.close()
    return lines


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: list[str] | None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", type=Path, default=REPO_ROOT / "docs" / "benchmarks.md")
    ap.add_argument("--runs", type=Path, default=REPO_ROOT / ".bench" / "runs" / "structure")
    args = ap.parse_args(argv)
    args.runs.mkdir(parents=True, exist_ok=True)
    scorer = _scorer()
    emb = SentenceTransformerEmbeddings()
    emb.warm_up()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    dev_q = scorer.load_questions(str(SHARED / "chunking_eval" / "questions.csv"))
    rest = [i for i, (corpus, _) in enumerate(dev_q) if corpus != "wikitexts"]
    header = [
        "| questions | query | parents | recall@1000c | recall@2000c | recall@4000c | ingest s |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    rows = await dataset(
        "structured",
        SHARED / "structured_eval",
        emb,
        scorer,
        args.runs,
        {"structured_eval (144)": None},
        QUERIES,
    )
    rows += await dataset(
        "dev",
        SHARED / "chunking_eval",
        emb,
        scorer,
        args.runs,
        {"dev set (276)": None, f"dev set without wikitexts ({len(rest)})": rest},
        QUERIES[1:],
    )
    rows.sort(key=lambda r: r.split("|")[1])
    replace_section(
        args.doc,
        "issue12-table",
        "\n".join(
            [
                f"Run {started}; {os.cpu_count()} cores ({platform.processor() or platform.machine()}); "
                "all-MiniLM-L6-v2 on CPU, late chunking, 400-character children, search defaults; "
                "scored by `../shared/benchmarks/score.py`.",
                f"Command: `{command(__name__)}`",
                "",
                *header,
                *rows,
            ]
        ),
        "## Structure-aware parents (issue 12)",
    )
    print(f"wrote {args.doc}", file=sys.stderr)
