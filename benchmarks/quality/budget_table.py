"""Budget-aware packing and expansion modes on the shared dev set (issue 4's table).

For each ingest configuration (child size, late chunking, parent size) the corpora are
ingested once into a throwaway collection; then every query configuration (mode,
budget, limit) runs every question through ``Chatbot.retrieve`` exactly as the bot and
``parrot-parents eval`` do, and the run is scored with the package's scorer (which agrees
with ``../shared/benchmarks/score.py``; see tests/eval). A budget of B characters is
scored by ``recall@Bc``; "no budget" rows are scored at every B by the scorer's own cut.

    python -m benchmarks run budget_table [--out docs/benchmarks.md] [--runs .bench/runs]

The table is written into ``--out`` between ``<!-- issue4-table:start -->`` and
``<!-- issue4-table:end -->``; the rest of the file is kept.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
from pathlib import Path

from benchmarks.common import CHUNKING_EVAL, REPO_ROOT, command, replace_section
from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.eval.questions import load_questions
from parrot_parents.eval.runner import fresh_collection_name, load_corpora
from parrot_parents.eval.scorer import score_run
from parrot_parents.loaders import TextLoader
from parrot_parents.stores.parents import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore

BUDGETS = (1000, 2000, 4000)

# (label, child size, late chunking, parent size)
INGESTS = [
    ("c400/p4000", 400, True, 4000),
    ("c300/p4000", 300, True, 4000),
]
# (label, expand, mode, budget per B or None, limit)
QUERIES = [
    ("children only, no budget", False, None, False, 40),
    ("parent, no budget", True, "parent", False, 10),
    ("auto_merge:0.3, no budget", True, "auto_merge:0.3", False, 10),
    ("window:1, no budget", True, "window:1", False, 10),
    ("parent, budget B", True, "parent", True, 20),
    ("auto_merge:0.3, budget B", True, "auto_merge:0.3", True, 20),
    ("window:1, budget B", True, "window:1", True, 20),
    ("window:2, budget B", True, "window:2", True, 20),
    ("children only, budget B", False, None, True, 40),
]


async def _run_queries(bot: Chatbot, questions, expand, mode, budget, limit):
    run, lat, used = {}, [], []
    # Dense search: this table predates hybrid search (now the default; issue 10's table).
    kwargs = {"expand_to_parent": expand, "limit": limit, "search_mode": "dense"}
    if mode:
        kwargs["mode"] = mode
    if budget:
        kwargs["budget"] = budget
    for q in questions:
        t = time.perf_counter()
        r = await bot.retrieve(q.question, **kwargs)
        lat.append((time.perf_counter() - t) * 1000)
        run[q.qid] = [(p.document_id, p.start_index, p.end_index) for p in r.passages]
        used.append(sum(p.end_index - p.start_index for p in r.passages))
    return run, lat, used


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: list[str] | None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO_ROOT / "docs" / "benchmarks.md"))
    ap.add_argument("--runs", default=str(REPO_ROOT / ".bench" / "runs"))
    ap.add_argument("--dsn", default=None)
    ap.add_argument(
        "--child-sizes",
        default=None,
        help="comma-separated child sizes to run instead of the default grid",
    )
    ap.add_argument(
        "--queries", default=None, help="comma-separated indexes into QUERIES to run (default: all)"
    )
    args = ap.parse_args(argv)
    ingests = INGESTS
    if args.child_sizes:
        ingests = [(f"c{c}/p4000", int(c), True, 4000) for c in args.child_sizes.split(",")]
    queries = QUERIES
    if args.queries:
        queries = [QUERIES[int(i)] for i in args.queries.split(",")]
    questions = load_questions(CHUNKING_EVAL / "questions.csv")
    corpora = load_corpora(CHUNKING_EVAL / "corpora")
    emb = SentenceTransformerEmbeddings()
    runs_dir = Path(args.runs)
    runs_dir.mkdir(parents=True, exist_ok=True)
    rows: list[str] = []
    for ilabel, child, late, parent in ingests:
        store = PgVectorStore(dsn=args.dsn, table=fresh_collection_name(), embedding=emb)
        loader = TextLoader(child_chunk_size=child, late_chunking=late, embedding=emb)
        from langchain_core.documents import Document

        docs = [
            Document(page_content=t, metadata={"document_id": cid}) for cid, t in corpora.items()
        ]
        t0 = time.perf_counter()
        await loader.chunk_documents(
            docs,
            vector_store=store,
            parent_chunk_threshold_tokens=parent,
            parent_chunk_size_tokens=parent,
            parent_chunk_overlap_tokens=200,
        )
        ingest_s = time.perf_counter() - t0
        bot = Chatbot(store=store, parent_searcher=InTableParentSearcher(store=store))
        try:
            for qlabel, expand, mode, budgeted, limit in queries:
                recalls, lats, useds = {}, [], []
                for b in BUDGETS if budgeted else (None,):
                    run, lat, used = await _run_queries(bot, questions, expand, mode, b, limit)
                    lats += lat
                    useds += used
                    scores = score_run(questions, run, ks=(5,), budgets=BUDGETS)
                    name = f"{ilabel}-{qlabel}-{b}".replace(" ", "_").replace("/", "_")
                    with open(runs_dir / f"{name}.jsonl", "w", encoding="utf-8") as f:
                        for qid, ps in run.items():
                            f.write(
                                json.dumps(
                                    {
                                        "qid": qid,
                                        "passages": [
                                            {"corpus_id": c, "start": s, "end": e} for c, s, e in ps
                                        ],
                                    }
                                )
                                + "\n"
                            )
                    for bb in BUDGETS:
                        if b is None or b == bb:
                            recalls[bb] = scores[f"recall@{bb}c"]
                    if b is None:
                        recalls["r5"] = scores["recall@5"]
                over = max(useds) if budgeted else None
                cells = " | ".join(f"{recalls[bb]:.3f}" for bb in BUDGETS)
                rows.append(
                    f"| {ilabel} | {qlabel} | {limit} | {cells} | "
                    f"{'—' if over is None else over} | "
                    f"{statistics.median(lats):.0f} / {sorted(lats)[int(0.95 * len(lats))]:.0f} "
                    f"| {ingest_s:.0f} |"
                )
                print(rows[-1], flush=True)
        finally:
            await store.drop()
            await store.close()
    table = "\n".join(
        [
            "| ingest (child/parent chars, late chunking on) | query | limit | recall@1000c "
            "| recall@2000c | recall@4000c | max chars handed over | query p50/p95 ms "
            "| ingest s |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )
    cpu = platform.processor() or platform.machine()
    body = (
        f"Machine: {os.cpu_count()} cores ({cpu}); all-MiniLM-L6-v2 on CPU; one collection for "
        "all three corpora; 276 dev questions.\n"
        f"Command: `{command(__name__)}`\n\n"
        f"{table}"
    )
    replace_section(
        Path(args.out), "issue4-table", body, "## Budget-aware packing and expansion modes"
    )
