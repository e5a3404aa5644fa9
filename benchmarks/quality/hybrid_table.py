# ruff: noqa: E501 - the Markdown tables are written as they appear
"""Hybrid search and the defaults, measured side by side on the shared dev set (issue 10).

Three tables, one run:

1. **Lexical ranking.** On the same late-chunked 300-character children: bm25s (the
   reference BM25, benchmark only), PostgreSQL's ``ts_rank`` and ``ts_rank_cd`` over the
   children's ``lexical`` column, our BM25 in SQL (``search_mode="lexical"``), dense, and
   hybrid. Recall@5 of the children alone (top 10), and p50 of the database part.
2. **The grid.** For each child size, every query configuration (search mode, expansion
   mode, limit) answers every question at each budget B and is scored by recall@Bc. The
   row marked *defaults* is ``Chatbot()`` with nothing set (what ``parrot-parents eval
   --budget B`` runs).
3. **Peers**, same run: plain 300-character chunks, dense top 40; and plain chunks with
   BM25 (bm25s) + dense fused by RRF k=60, top 40 (what LangChain's EnsembleRetriever
   assembles), via ``benchmarks/common.py``.

    pip install -e ".[bench]"
    python -m benchmarks run hybrid_table [--doc docs/benchmarks.md] [--quick]

The tables replace the text between ``<!-- issue10-table:start -->`` and
``<!-- issue10-table:end -->`` in ``--doc``. Run files go to ``.bench/runs/hybrid/``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from sqlalchemy import text

from benchmarks.common import (
    CHUNKING_EVAL,
    REPO_ROOT,
    bm25_dense_rrf,
    command,
    replace_section,
)
from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.eval.questions import load_questions
from parrot_parents.eval.runner import fresh_collection_name, load_corpora
from parrot_parents.eval.scorer import score_run
from parrot_parents.loaders import TextLoader
from parrot_parents.loaders.hierarchy import DEFAULT_CHILD_SIZE
from parrot_parents.retrieval.options import BUDGETED_LIMIT, DEFAULTS
from parrot_parents.stores.parents import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.records.markers import CHILD_PREDICATE
from parrot_parents.strategies.build import indexer_for
from parrot_parents.strategies.spec import DEFAULT_STRATEGY, parse_strategy

BUDGETS = (1000, 2000, 4000)

# (label, options); None values are left unset, so the defaults apply.
QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("defaults", {}),
    (
        "dense, children only, limit 40",
        {"expand_to_parent": False, "limit": 40, "search_mode": "dense"},
    ),
    (
        "hybrid, children only, limit 20",
        {"expand_to_parent": False, "limit": 20, "search_mode": "hybrid"},
    ),
    (
        "hybrid, children only, limit 40",
        {"expand_to_parent": False, "limit": 40, "search_mode": "hybrid"},
    ),
    (
        "dense, window:1, limit 20",
        {"expand_to_parent": True, "mode": "window:1", "limit": 20, "search_mode": "dense"},
    ),
    (
        "hybrid, window:1, limit 20",
        {"expand_to_parent": True, "mode": "window:1", "limit": 20, "search_mode": "hybrid"},
    ),
    (
        "hybrid, window:1, limit 30",
        {"expand_to_parent": True, "mode": "window:1", "limit": 30, "search_mode": "hybrid"},
    ),
    (
        "dense, parent, limit 20",
        {"expand_to_parent": True, "mode": "parent", "limit": 20, "search_mode": "dense"},
    ),
    (
        "hybrid, parent, limit 20",
        {"expand_to_parent": True, "mode": "parent", "limit": 20, "search_mode": "hybrid"},
    ),
]
CHILD_SIZES = (200, 250, 300, 400)


def _write_run(path: Path, run: dict[int, list[tuple[str, int, int]]]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for qid, ps in run.items():
            passages = [{"corpus_id": c, "start": s, "end": e} for c, s, e in ps]
            f.write(json.dumps({"qid": qid, "passages": passages}) + "\n")


async def ingest_corpora(
    emb: Any, corpora: dict[str, str], child: int, dsn: str | None, strategy: str = "plain"
) -> PgVectorStore:
    """A fresh collection of the corpora; ``strategy`` is the ingestion strategy (the
    grid's query rows use ``plain`` children; the defaults row the package default)."""
    store = PgVectorStore(dsn=dsn, table=fresh_collection_name(), embedding=emb)
    indexer = indexer_for(parse_strategy(strategy))
    loader = TextLoader(child_chunk_size=child, embedding=emb, indexer=indexer)
    docs = [Document(page_content=t, metadata={"document_id": c}) for c, t in corpora.items()]
    try:
        await loader.chunk_documents(docs, vector_store=store)
    finally:
        if indexer is not None:
            await indexer.close()
    return store


async def lexical_table(
    emb: Any, questions: list[Any], corpora: dict[str, str], dsn: str | None, runs: Path
) -> list[str]:
    import bm25s
    import Stemmer

    store = await ingest_corpora(emb, corpora, 300, dsn)
    try:
        engine, _ = await store.ready()
        async with engine.connect() as conn:
            kids = (
                await conn.execute(
                    text(
                        f"SELECT document, cmetadata FROM {store.qualified_name}"
                        f" WHERE {CHILD_PREDICATE} ORDER BY id"
                    )
                )
            ).all()
        spans = [
            (k.cmetadata["document_id"], k.cmetadata["start_index"], k.cmetadata["end_index"])
            for k in kids
        ]
        stemmer = Stemmer.Stemmer("english")
        bm = bm25s.BM25()
        bm.index(
            bm25s.tokenize(
                [k.document for k in kids], stopwords="en", stemmer=stemmer, show_progress=False
            ),
            show_progress=False,
        )
        vectors = [await emb.aembed_query(q.question) for q in questions]
        variants = [
            "bm25s (reference)",
            "ts_rank_cd",
            "ts_rank",
            "ours: BM25 in SQL",
            "dense",
            "hybrid (RRF k=60)",
        ]
        run: dict[str, dict[int, list[tuple[str, int, int]]]] = {v: {} for v in variants}
        lat: dict[str, list[float]] = {v: [] for v in variants}
        or_query = "replace(plainto_tsquery('english', :q)::text, '&', '|')::tsquery"
        # Interleaved question by question, so that the machine's noise hits every variant.
        for i, q in enumerate(questions):
            t0 = time.perf_counter()
            ids, _ = bm.retrieve(
                bm25s.tokenize([q.question], stopwords="en", stemmer=stemmer, show_progress=False),
                k=10,
                show_progress=False,
            )
            lat["bm25s (reference)"].append(time.perf_counter() - t0)
            run["bm25s (reference)"][q.qid] = [spans[j] for j in ids[0]]
            for name, rank in (("ts_rank_cd", "ts_rank_cd"), ("ts_rank", "ts_rank")):
                sql = text(
                    f"SELECT cmetadata FROM {store.qualified_name}, (SELECT {or_query} AS q) qq"
                    f" WHERE lexical @@ q ORDER BY {rank}(lexical, q) DESC, id LIMIT 10"
                )
                t0 = time.perf_counter()
                async with engine.connect() as conn:
                    rows = (await conn.execute(sql, {"q": q.question})).all()
                lat[name].append(time.perf_counter() - t0)
                run[name][q.qid] = [
                    (
                        r.cmetadata["document_id"],
                        r.cmetadata["start_index"],
                        r.cmetadata["end_index"],
                    )
                    for r in rows
                ]
            for name, mode in (
                ("ours: BM25 in SQL", "lexical"),
                ("dense", "dense"),
                ("hybrid (RRF k=60)", "hybrid"),
            ):
                t0 = time.perf_counter()
                rows = await store.similarity_search_by_vector(
                    vectors[i], limit=10, search_mode=mode, query=q.question
                )
                lat[name].append(time.perf_counter() - t0)
                run[name][q.qid] = [
                    (r.metadata["document_id"], r.metadata["start_index"], r.metadata["end_index"])
                    for r in rows
                ]
        lines = [
            "| children ranked by (late-chunked 300-char children, top 10) | recall@5 | recall@10 | database p50 ms (vector given) |",
            "|---|---:|---:|---:|",
        ]
        for v in variants:
            m = score_run(questions, run[v], ks=(5, 10), budgets=BUDGETS)
            _write_run(runs / f"lexical-{v.split()[0].strip(':')}.jsonl", run[v])
            lines.append(
                f"| {v} | {m['recall@5']:.3f} | {m['recall@10']:.3f} | {statistics.median(lat[v]) * 1000:.2f} |"
            )
            print(lines[-1], flush=True)
        return lines
    finally:
        await store.drop()
        await store.close()


async def grid(
    emb: Any,
    questions: list[Any],
    corpora: dict[str, str],
    dsn: str | None,
    runs: Path,
    sizes: tuple[int, ...],
    queries: list[tuple[str, dict[str, Any]]],
) -> list[str]:
    lines = [
        "| children (chars) | query | recall@1000c | recall@2000c | recall@4000c | max chars handed over | p50 ms (embedding included) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for child in sizes:
        store = await ingest_corpora(emb, corpora, child, dsn)
        default_store = None
        if child == DEFAULT_CHILD_SIZE and any(label == "defaults" for label, _ in queries):
            # What `parrot-parents eval --budget B` runs: the default ingestion strategy too.
            default_store = await ingest_corpora(emb, corpora, child, dsn, DEFAULT_STRATEGY)
        bots = {
            s: Chatbot(store=s, parent_searcher=InTableParentSearcher(store=s), owns_store=False)
            for s in (store, default_store)
            if s is not None
        }
        try:
            for label, options in queries:
                if label == "defaults" and default_store is None:
                    continue
                bot = bots[default_store if label == "defaults" else store]
                recall, used, lat = {}, [], []
                for b in BUDGETS:
                    run = {}
                    for q in questions:
                        t0 = time.perf_counter()
                        r = await bot.retrieve(q.question, budget=b, **options)
                        lat.append((time.perf_counter() - t0) * 1000)
                        run[q.qid] = [
                            (p.document_id, p.start_index, p.end_index) for p in r.passages
                        ]
                        used.append(sum(p.end_index - p.start_index for p in r.passages))
                    recall[b] = score_run(questions, run, ks=(5,), budgets=(b,))[f"recall@{b}c"]
                    _write_run(
                        runs
                        / f"grid-c{child}-{label.replace(' ', '_').replace(',', '').replace(':', '')}-{b}.jsonl",
                        run,
                    )
                name = f"**{label}** (ingest: {DEFAULT_STRATEGY})" if label == "defaults" else label
                lines.append(
                    f"| {child} | {name} | {recall[1000]:.3f} | {recall[2000]:.3f} | {recall[4000]:.3f} | {max(used)} | {statistics.median(lat):.1f} |"
                )
                print(lines[-1], flush=True)
        finally:
            for s in bots:
                await s.drop()
                await s.close()
    return lines


def peers(emb: Any, questions: list[Any], corpora: dict[str, str], runs: Path) -> list[str]:

    fused, dense = bm25_dense_rrf(
        questions, corpora, emb, chunk_size=300, log=lambda m: print(m, file=sys.stderr)
    )
    lines = [
        "| peer (plain 300-char chunks, top 40, cut at B by the scorer) | recall@1000c | recall@2000c | recall@4000c |",
        "|---|---:|---:|---:|",
    ]
    for label, run in (("dense", dense), ("BM25 (bm25s) + dense, RRF k=60", fused)):
        m = score_run(questions, run, ks=(5,), budgets=BUDGETS)
        _write_run(runs / f"peer-{label.split()[0]}.jsonl", run)
        lines.append(
            f"| {label} | {m['recall@1000c']:.3f} | {m['recall@2000c']:.3f} | {m['recall@4000c']:.3f} |"
        )
        print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: list[str] | None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", type=Path, default=REPO_ROOT / "docs" / "benchmarks.md")
    ap.add_argument("--runs", type=Path, default=REPO_ROOT / ".bench" / "runs" / "hybrid")
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--sizes", default=",".join(map(str, CHILD_SIZES)))
    ap.add_argument("--queries", default=None, help="comma-separated indexes into QUERIES")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: lexical,grid,peers")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    args.runs.mkdir(parents=True, exist_ok=True)
    questions = load_questions(CHUNKING_EVAL / "questions.csv")
    corpora = load_corpora(CHUNKING_EVAL / "corpora")
    emb = SentenceTransformerEmbeddings()
    emb.warm_up()
    queries = (
        QUERIES if args.queries is None else [QUERIES[int(i)] for i in args.queries.split(",")]
    )
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    parts = []
    if "lexical" not in skip:
        parts += [
            "### Lexical ranking",
            "",
            *await lexical_table(emb, questions, corpora, args.dsn, args.runs),
            "",
        ]
    if "grid" not in skip:
        sizes = tuple(int(s) for s in args.sizes.split(","))
        parts += [
            "### Search mode, child size, expansion and limit at each budget",
            "",
            *await grid(emb, questions, corpora, args.dsn, args.runs, sizes, queries),
            "",
        ]
    if "peers" not in skip:
        parts += ["### Peers, same run", "", *peers(emb, questions, corpora, args.runs), ""]
    cpu = platform.processor() or platform.machine()
    defaults = {k: str(v) for k, v in DEFAULTS.set_fields().items()}
    replace_section(
        args.doc,
        "issue10-table",
        "\n".join(
            [
                f"Run {started}; {os.cpu_count()} cores ({cpu}); all-MiniLM-L6-v2 on CPU, late chunking; "
                f"276 dev questions. Package defaults: child size {DEFAULT_CHILD_SIZE}, {json.dumps(defaults)}; "
                f"with a budget and no limit set, limit {BUDGETED_LIMIT}; ingestion strategy {DEFAULT_STRATEGY} "
                "for the defaults row, plain children for the others.",
                f"Command: `{command(__name__, sys.argv[1:])}`",
                "",
                *parts,
            ]
        ),
        "## Hybrid search and the defaults (issue 10)",
    )
    print(f"wrote {args.doc}", file=sys.stderr)
