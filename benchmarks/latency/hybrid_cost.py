# ruff: noqa: E501 - the Markdown tables are written as they appear
"""What hybrid search costs against dense search, measured side by side (issue 10).

Two tables, one run, on the shared dev set (late-chunked children of the default size):

1. **Query latency.** Every dev question is asked twice per round, once with
   ``search_mode="dense"`` and once with the package defaults (hybrid), alternating which
   goes first, through ``Chatbot.retrieve`` with the default budget options. Reported: p50
   and p95 with the query embedding included (what a caller waits for), and p50 of the
   database part alone (``similarity_search_by_vector``, vector given). The ratio is the
   target of issue 10 (hybrid at most 1.5x dense, embedding included).
2. **Ingest throughput.** The dev corpora are ingested end to end (late chunking, the
   model included) into two collections, one with the lexical index (generated
   ``tsvector`` column, GIN index, BM25 statistics triggers) and one without, one
   document at a time, alternating which collection goes first. Then the writer alone:
   every document's rows are re-written with their vectors given
   (``replace_document``), into each collection, alternating, three times.

    python -m benchmarks run hybrid_cost [--doc docs/benchmarks.md] [--rounds 2]

The tables replace the text between ``<!-- issue10-cost:start -->`` and
``<!-- issue10-cost:end -->`` in ``--doc``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from sqlalchemy import select, text

from benchmarks.common import CHUNKING_EVAL, REPO_ROOT, command, replace_section
from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.eval.questions import load_questions
from parrot_parents.eval.runner import fresh_collection_name, load_corpora
from parrot_parents.loaders import TextLoader
from parrot_parents.loaders.hierarchy import DEFAULT_CHILD_SIZE
from parrot_parents.retrieval.options import DEFAULTS
from parrot_parents.stores.parents import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.search.lexical import drop_lexical
from parrot_parents.strategies.spec import DEFAULT_STRATEGY

BUDGET = 2000


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


async def latency(
    emb: Any, corpora: dict[str, str], questions: list[Any], rounds: int, dsn: str | None
) -> list[str]:
    from hybrid_table import ingest_corpora

    # The default ingestion too: hits on indexed rows resolve to their children.
    store = await ingest_corpora(emb, corpora, DEFAULT_CHILD_SIZE, dsn, DEFAULT_STRATEGY)
    try:
        bot = Chatbot(
            store=store, parent_searcher=InTableParentSearcher(store=store), owns_store=False
        )
        total: dict[str, list[float]] = {"dense": [], "hybrid": []}
        db: dict[str, list[float]] = {"dense": [], "hybrid": []}
        calls = {"dense": {"search_mode": "dense"}, "hybrid": {}}
        for q in questions[:5]:  # warm the pool, the plan caches and the model
            for c in calls.values():
                await bot.retrieve(q.question, budget=BUDGET, **c)
        for r in range(rounds):
            for i, q in enumerate(questions):
                order = ["dense", "hybrid"] if (i + r) % 2 == 0 else ["hybrid", "dense"]
                for name in order:
                    t0 = time.perf_counter()
                    await bot.retrieve(q.question, budget=BUDGET, **calls[name])
                    total[name].append((time.perf_counter() - t0) * 1000)
                vector = await emb.aembed_query(q.question)
                for name in order:
                    t0 = time.perf_counter()
                    await store.similarity_search_by_vector(
                        vector, limit=DEFAULTS.limit or 10, search_mode=name, query=q.question
                    )
                    db[name].append((time.perf_counter() - t0) * 1000)
        d50, h50 = statistics.median(total["dense"]), statistics.median(total["hybrid"])
        lines = [
            f"| search (defaults otherwise, budget {BUDGET}) | p50 ms, embedding included | p95 ms | database p50 ms (vector given) |",
            "|---|---:|---:|---:|",
        ]
        for name in ("dense", "hybrid"):
            label = "hybrid (**defaults**)" if name == "hybrid" else "dense"
            lines.append(
                f"| {label} | {statistics.median(total[name]):.1f} | {_p(total[name], 95):.1f} | {statistics.median(db[name]):.2f} |"
            )
        lines.append(
            f"| **ratio hybrid / dense** | **{h50 / d50:.2f}x** | {_p(total['hybrid'], 95) / _p(total['dense'], 95):.2f}x | {statistics.median(db['hybrid']) / statistics.median(db['dense']):.2f}x |"
        )
        print("\n".join(lines), flush=True)
        return lines
    finally:
        await store.drop()
        await store.close()


async def _without_lexical(store: PgVectorStore) -> None:
    """No lexical index at all: no statistics, triggers, GIN index or tsvector column."""
    engine, _ = await store.ready()
    async with engine.begin() as conn:
        await conn.run_sync(drop_lexical, store.table, store.schema)
        await conn.execute(text(f"ALTER TABLE {store.qualified_name} DROP COLUMN lexical CASCADE"))
    store.text_search_config = None


WITH, WITHOUT = "with the lexical index", "without"


async def _pair(emb: Any, dsn: str | None) -> dict[str, PgVectorStore]:
    stores = {
        WITH: PgVectorStore(dsn=dsn, table=fresh_collection_name(), embedding=emb),
        WITHOUT: PgVectorStore(dsn=dsn, table=fresh_collection_name(), embedding=emb),
    }
    await stores[WITH].ready()
    await _without_lexical(stores[WITHOUT])
    return stores


async def _drop(stores: dict[str, PgVectorStore]) -> None:
    for s in stores.values():
        await s.drop()
        await s.close()


async def ingest(emb: Any, corpora: dict[str, str], dsn: str | None, passes: int) -> list[str]:
    names = [WITH, WITHOUT]
    loader = TextLoader(embedding=emb)
    wall = dict.fromkeys(names, 0.0)
    rows = dict.fromkeys(names, 0)
    # End to end: each pass ingests every corpus into a fresh pair of collections, one
    # document at a time, alternating which collection goes first.
    for p in range(passes):
        stores = await _pair(emb, dsn)
        try:
            for i, (cid, body) in enumerate(corpora.items()):
                doc = Document(page_content=body, metadata={"document_id": cid})
                for name in names if (i + p) % 2 == 0 else names[::-1]:
                    t0 = time.perf_counter()
                    await loader.chunk_documents([doc], vector_store=stores[name])
                    wall[name] += time.perf_counter() - t0
            for n in names:
                rows[n] += await stores[n].count()
        finally:
            await _drop(stores)
    chars = passes * sum(len(t) for t in corpora.values())
    # The writer alone: the same rows, vectors given, replaced document by document.
    stores = await _pair(emb, dsn)
    writer = dict.fromkeys(names, 0.0)
    written = 0
    try:
        await loader.chunk_documents(
            [Document(page_content=t, metadata={"document_id": c}) for c, t in corpora.items()],
            vector_store=stores[WITHOUT],
        )
        engine, table = await stores[WITHOUT].ready()
        async with engine.connect() as conn:
            stored = (
                await conn.execute(
                    select(table.c.id, table.c.document, table.c.cmetadata, table.c.embedding)
                )
            ).all()
        by_doc: dict[str, list[Any]] = {}
        for r in stored:
            by_doc.setdefault(r.cmetadata["document_id"], []).append(r)
        for rep in range(3):
            for i, (doc_id, group) in enumerate(by_doc.items()):
                docs = [
                    Document(id=r.id, page_content=r.document, metadata=r.cmetadata) for r in group
                ]
                vecs = [r.embedding for r in group]
                written += len(group)
                for name in names if (i + rep) % 2 == 0 else names[::-1]:
                    t0 = time.perf_counter()
                    await stores[name].replace_document(doc_id, docs, embeddings=vecs)
                    writer[name] += time.perf_counter() - t0
    finally:
        await _drop(stores)
    lines = [
        f"| collection | end-to-end ingest s ({passes} passes, late chunking, model included) | chars/s | rows/s | writer alone: rows/s (vectors given, replace, 3 passes) |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in names:
        lines.append(
            f"| {name} | {wall[name]:.1f} | {chars / wall[name]:,.0f} | {rows[name] / wall[name]:,.0f} | {written / writer[name]:,.0f} |"
        )
    lines.append(
        f"| **throughput with / without** | **{wall[WITHOUT] / wall[WITH]:.2f}x** | | | **{writer[WITHOUT] / writer[WITH]:.2f}x** |"
    )
    print("\n".join(lines), flush=True)
    return lines


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: list[str] | None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--doc", type=Path, default=REPO_ROOT / "docs" / "benchmarks.md")
    ap.add_argument("--dsn", default=None)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--passes", type=int, default=3, help="end-to-end ingest passes")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: latency,ingest")
    args = ap.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    questions = load_questions(CHUNKING_EVAL / "questions.csv")
    corpora = load_corpora(CHUNKING_EVAL / "corpora")
    emb = SentenceTransformerEmbeddings()
    emb.warm_up()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    parts: list[str] = []
    if "latency" not in skip:
        parts += [
            "#### Query latency, hybrid against dense",
            "",
            *await latency(emb, corpora, questions, args.rounds, args.dsn),
            "",
        ]
    if "ingest" not in skip:
        parts += [
            "#### Ingest throughput, with and without the lexical index",
            "",
            *await ingest(emb, corpora, args.dsn, args.passes),
            "",
        ]
    cpu = platform.processor() or platform.machine()
    replace_section(
        args.doc,
        "issue10-cost",
        "\n".join(
            [
                f"Run {started}; {os.cpu_count()} cores ({cpu}); all-MiniLM-L6-v2 on CPU; child size {DEFAULT_CHILD_SIZE}; "
                f"latency on a collection ingested with the default strategy ({DEFAULT_STRATEGY}), ingest throughput with plain children; "
                f"{len(questions)} dev questions x {args.rounds} rounds, interleaved.",
                f"Command: `{command(__name__, sys.argv[1:])}`",
                "",
                *parts,
            ]
        ),
        "### What hybrid search costs",
    )
    print(f"wrote {args.doc}", file=sys.stderr)
