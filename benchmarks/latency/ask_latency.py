"""Median ``ask`` latency over the 20 example questions, on the embedded PostgreSQL.

Ingests ``examples/corpus`` into a throwaway collection, warms the model up with one
query, then times ``Chatbot.get_vector_context`` (query embedding, vector search, parent
fetch) for each question in ``examples/questions.txt``, with and without expansion.

    python -m benchmarks run ask_latency [--out benchmarks/reports/ask_latency.md]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from pathlib import Path

from benchmarks.common import REPO_ROOT, REPORTS, command
from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.loaders import TextLoader
from parrot_parents.stores.parents import InTableParentSearcher
from parrot_parents.stores.postgres import PgVectorStore


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: list[str] | None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPORTS / "ask_latency.md"))
    args = ap.parse_args(argv)
    questions = (REPO_ROOT / "examples" / "questions.txt").read_text(encoding="utf-8").split("\n")
    questions = [q for q in questions if q.strip()]
    store = PgVectorStore(table=f"bench_{uuid.uuid4().hex[:8]}")
    try:
        await TextLoader(REPO_ROOT / "examples" / "corpus").ingest(store)
        bot = Chatbot(
            store=store, parent_searcher=InTableParentSearcher(store=store), context_search_limit=5
        )
        await bot.get_vector_context("warm up")
        rows = []
        for expand in (False, True):
            times = []
            for q in questions:
                t = time.perf_counter()
                await bot.get_vector_context(q, expand_to_parent=expand)
                times.append((time.perf_counter() - t) * 1000)
            rows.append((expand, statistics.median(times), max(times)))
    finally:
        await store.drop()
        await store.close()
    lines = [
        "# ask latency on the shipped corpus (embedded PostgreSQL)",
        "",
        f"Machine: {os.cpu_count()} cores; all-MiniLM-L6-v2 on CPU; limit 5; "
        f"{len(questions)} questions from examples/questions.txt, after one warm-up query.",
        f"Command: `{command(__name__)}`",
        "",
        "| expansion | median ms | max ms |",
        "|---|---|---|",
        *[f"| {'on' if e else 'off'} | {m:.1f} | {x:.1f} |" for e, m, x in rows],
    ]
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
