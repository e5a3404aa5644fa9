"""Dense vs lexical (BM25) vs hybrid search on Milvus Lite, on the shared dev set.

Ingests the three corpora of ``../shared/benchmarks/chunking_eval`` once into a Milvus
Lite file (300-character late-chunked children, 4000-character parent_chunks above 16000
characters: the configuration of ``docs/benchmarks.md``'s budget table), then runs the
276 questions through the same pipeline (limit 20, parent expansion, budget B) with the
children searched four ways:

* ``dense``: cosine similarity of the embeddings (the default);
* ``lexical``: the engine's BM25 function over the analyzed text;
* ``hybrid (engine RRF)``: ``MilvusStore.similarity_search(search_mode="hybrid")``,
  Milvus's own hybrid search with ``RRFRanker(60)``;
* ``hybrid (our RRF)``: dense and lexical lists (same candidate depth) fused here with
  reciprocal rank fusion, k=60 (Cormack et al., 2009), ties to the dense order.

Each budget B in 1000/2000/4000 characters is its own run, scored by ``recall@Bc``.

    python -m benchmarks run milvus_hybrid [--out benchmarks/reports/milvus_hybrid.md]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from benchmarks.common import CHUNKING_EVAL, REPORTS, command
from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.eval.questions import check_references, load_corpora, load_questions
from parrot_parents.eval.scorer import score_run
from parrot_parents.loaders import TextLoader
from parrot_parents.stores.abstract import AbstractStore
from parrot_parents.stores.milvus import MilvusParentSearcher, MilvusStore
from parrot_parents.stores.results import SearchResult
from parrot_parents.stores.search_options import Fusion

BUDGETS = (1000, 2000, 4000)
MODES = ("dense", "lexical", "hybrid (engine RRF)", "hybrid (our RRF)")


class SearchModeStore(AbstractStore):
    """A MilvusStore whose ``similarity_search`` always uses one search mode."""

    def __init__(self, inner: MilvusStore, mode: str) -> None:
        self.inner, self.mode = inner, mode

    async def add_documents(self, documents: Sequence[Document], **kw: Any) -> list[str]:
        return await self.inner.add_documents(documents, **kw)

    async def delete(self, document_id: str) -> int:
        return await self.inner.delete(document_id)

    async def similarity_search(
        self,
        query: str,
        limit: int = 10,
        include_parents: bool = False,
        filter: dict[str, Any] | None = None,
    ) -> list[SearchResult]:
        search = self.inner.similarity_search
        if self.mode == "dense":
            return await search(query, limit, filter=filter)
        if self.mode == "lexical":
            return await search(query, limit, filter=filter, search_mode="lexical")
        if self.mode == "hybrid (engine RRF)":
            return await search(query, limit, filter=filter, search_mode="hybrid")
        depth = max(2 * limit, 20)  # the engine path's candidate depth
        dense = await search(query, depth, filter=filter)
        lexical = await search(query, depth, filter=filter, search_mode="lexical")
        fused: dict[str, float] = {}
        rows: dict[str, SearchResult] = {}
        for results in (dense, lexical):
            for rank, r in enumerate(results, 1):
                fused[r.id] = fused.get(r.id, 0.0) + 1.0 / (Fusion().rrf_k + rank)
                rows.setdefault(r.id, r)
        order = sorted(fused, key=lambda i: -fused[i])  # stable: dense order breaks ties
        return [
            SearchResult(id=i, content=rows[i].content, metadata=rows[i].metadata, score=fused[i])
            for i in order[:limit]
        ]


def main(argv: list[str] | None = None) -> None:
    asyncio.run(_main(argv))


async def _main(argv: list[str] | None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPORTS / "milvus_hybrid.md"))
    args = ap.parse_args(argv)
    questions = load_questions(CHUNKING_EVAL / "questions.csv")
    corpora = load_corpora(CHUNKING_EVAL / "corpora")
    check_references(questions, corpora)
    embedding = SentenceTransformerEmbeddings()
    store = MilvusStore(
        str(Path(tempfile.mkdtemp(prefix="hybrid-")) / "milvus.db"), "dev", embedding=embedding
    )
    results: dict[str, dict[str, float]] = {}
    try:
        await TextLoader(child_chunk_size=300, embedding=embedding).chunk_documents(
            [
                Document(page_content=t, metadata={"document_id": c, "source": c})
                for c, t in corpora.items()
            ],
            vector_store=store,
        )
        searcher = MilvusParentSearcher(store)
        for mode in MODES:
            bot = Chatbot(
                store=SearchModeStore(store, mode),
                parent_searcher=searcher,
                expand_to_parent=True,
                context_search_limit=20,
            )
            row: dict[str, float] = {}
            latencies: list[float] = []
            for budget in BUDGETS:
                run = {}
                for q in questions:
                    started = time.perf_counter()
                    r = await bot.retrieve(q.question, budget=budget)
                    latencies.append((time.perf_counter() - started) * 1000)
                    run[q.qid] = [(p.document_id, p.start_index, p.end_index) for p in r.passages]
                metrics = score_run(questions, run, ks=(5,), budgets=(budget,))
                row[f"recall@{budget}c"] = float(metrics[f"recall@{budget}c"])
            row["p50_ms"] = statistics.median(latencies)
            results[mode] = row
            print(mode, row, flush=True)
    finally:
        await store.drop()
    lines = [
        "# Search modes on Milvus Lite (dev set, 276 questions)",
        "",
        f"Generated by `{command(__name__)}` (see its docstring): c300/p4000,",
        "late chunking, limit 20, parent expansion, budget B per run, all-MiniLM-L6-v2 on CPU,",
        "pymilvus 3.0.2 / milvus-lite 3.2.2. Latency: median `retrieve` time over all runs",
        "(query embedding included; machine shared, compare within this table only).",
        "",
        "| search | recall@1000c | recall@2000c | recall@4000c | p50 ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for mode, row in results.items():
        cells = " | ".join(f"{row[f'recall@{b}c']:.3f}" for b in BUDGETS)
        lines.append(f"| {mode} | {cells} | {row['p50_ms']:.0f} |")
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
