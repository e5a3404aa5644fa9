"""Every benchmark: its name, its group and its purpose in one line.

A benchmark ``NAME`` of group ``GROUP`` is the module ``benchmarks.GROUP.NAME``, and its
``main(argv)`` runs it (``argv``: the arguments after ``run NAME``). Modules and packages
whose name starts with ``_`` are a benchmark's own parts, not benchmarks. What each one
measures, how long it takes and what it writes: ``benchmarks/README.md``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["BENCHMARKS", "GROUPS", "Benchmark", "find"]

Group = Literal["quality", "latency", "throughput"]

#: The groups, in the order ``list`` prints them.
GROUPS: tuple[Group, ...] = ("quality", "latency", "throughput")


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: ``name`` (as given to ``run``), ``group`` and ``purpose`` (one line)."""

    name: str
    group: Group
    purpose: str

    @property
    def module(self) -> str:
        """The dotted name of its module, ``benchmarks.<group>.<name>``."""
        return f"benchmarks.{self.group}.{self.name}"

    def main(self) -> Callable[[list[str] | None], Any]:
        """Its module's ``main`` (importing the module runs nothing else)."""
        main: Callable[[list[str] | None], Any] = importlib.import_module(self.module).main
        return main


BENCHMARKS: tuple[Benchmark, ...] = (
    # quality: what the retrieval hands over, scored on the shared dev set
    Benchmark(
        "eval_table",
        "quality",
        "children only against parent expansion, late chunking off and on (parrot-parents eval)",
    ),
    Benchmark(
        "budget_table",
        "quality",
        "budget-aware packing and expansion modes, scored by recall at a character budget",
    ),
    Benchmark(
        "budget_curve",
        "quality",
        "recall against the context budget: ours against BM25+dense, LangChain, LlamaIndex",
    ),
    Benchmark(
        "hybrid_table",
        "quality",
        "lexical rankers, the search-mode and expansion grid, and the defaults, with peers",
    ),
    Benchmark(
        "default_levers",
        "quality",
        "what trimming, late chunking and the indexed rows add, and the old defaults, one run",
    ),
    Benchmark(
        "transfer",
        "quality",
        "leave one corpus out: each default lever per fold and budget, its interval, the rule",
    ),
    Benchmark(
        "lexical_backends",
        "quality",
        "the dev set with pg_textsearch's bm25 index and with BM25 in SQL, one run",
    ),
    Benchmark(
        "distractors",
        "quality",
        "the dev set among 100k children of Debian manuals: default rule, exact BM25, two peers",
    ),
    Benchmark(
        "trim_grid",
        "quality",
        "sentence trimming's whole-child share and rank decay, the same hits packed each way",
    ),
    Benchmark(
        "trim_transfer",
        "quality",
        "sentence trimming's share and decay chosen on the other folds of the transfer protocol",
    ),
    Benchmark(
        "strategy_table",
        "quality",
        "ingestion strategies side by side, one parrot-parents eval --strategy run each",
    ),
    Benchmark(
        "structure_table",
        "quality",
        "section parents (Markdown headings) against fixed 4000-character parent chunks",
    ),
    Benchmark(
        "milvus_hybrid",
        "quality",
        "dense, BM25 and hybrid search (engine RRF and ours) on Milvus Lite",
    ),
    Benchmark(
        "milvus_defaults",
        "quality",
        "the defaults (ingest and query) on PostgreSQL and on Milvus Lite, dev set, one run",
    ),
    Benchmark(
        "milvus_parity",
        "quality",
        "the same passages on Milvus Lite as on PostgreSQL for the 20 example questions",
    ),
    Benchmark(
        "ai_parrot",
        "quality",
        "ai-parrot's own parent-child route (FEAT-128) against parrot-parents, dev set, one run",
    ),
    # latency: how long one call waits
    Benchmark(
        "scale",
        "latency",
        "query latency, HNSW recall and plans at 10k/100k/1M children, against bare kNN",
    ),
    Benchmark(
        "partitions",
        "latency",
        "a 1 % tenant's search through its own HNSW index (partition_key) against the filter",
    ),
    Benchmark(
        "lexical_rules",
        "latency",
        "BM25 in SQL under candidate rules at 100k/1M children: p50/p95 and exact top-k found",
    ),
    Benchmark(
        "hnsw_recall",
        "latency",
        "HNSW recall@10 and kNN p50/p95 per ef_search on real HTML ingested by the product",
    ),
    Benchmark(
        "checkouts",
        "latency",
        "similarity_search and get_vector_context p50, this tree against another checkout",
    ),
    Benchmark(
        "round_trips",
        "latency",
        "round trips to PostgreSQL of one query, counted on the wire",
    ),
    Benchmark(
        "statement_cache",
        "latency",
        "searches cycling through many partition values against the statements kept per connection",
    ),
    Benchmark(
        "ask_latency",
        "latency",
        "median get_vector_context time over the 20 example questions, expansion off and on",
    ),
    Benchmark(
        "row_layout",
        "latency",
        "vectors out of line (TOAST) against kept in the row: exact filtered ranking, BM25 reads",
    ),
    Benchmark(
        "filtered_plans",
        "latency",
        "filtered search: planner estimates, capped counts, exact ranking, bounded HNSW scans",
    ),
    Benchmark(
        "filters",
        "latency",
        "filtered against unfiltered search: each kind of filter at 0.1 to 50 %, p50, p95, recall",
    ),
    Benchmark(
        "hybrid_cost",
        "latency",
        "what hybrid search costs against dense: query latency and ingest throughput",
    ),
    Benchmark(
        "scale_concurrency",
        "latency",
        "200 concurrent get_vector_context calls and CLI wall times, baseline against this tree",
    ),
    Benchmark(
        "reranker_latency",
        "latency",
        "latency the cross-encoder reranker adds per query (p50 / p95)",
    ),
    Benchmark(
        "onnx_speed",
        "latency",
        "query and document embedding speed, torch against ONNX Runtime",
    ),
    # throughput: how much goes through, and what still works under load
    Benchmark(
        "scale_write",
        "throughput",
        "the bulk writer at 100k children against raw COPY and the baseline's writer",
    ),
    Benchmark(
        "ingest_profile",
        "throughput",
        "ingest tokens/s with the defaults against an older checkout, and where the time goes",
    ),
    Benchmark(
        "late_chunking_throughput",
        "throughput",
        "tokens/s of late chunking against embedding each child on its own (CPU)",
    ),
    Benchmark(
        "gpu_late_chunking",
        "throughput",
        "late-chunking ingest throughput on a GPU in fp16, against the FLOP bound",
    ),
    Benchmark(
        "bm25_stress",
        "throughput",
        "pg_textsearch's bm25 index under concurrent writes, ranked searches and vacuum",
    ),
    Benchmark(
        "reliability",
        "throughput",
        "hostile inputs, concurrent searchers and writers, an outage, a crash, two servers",
    ),
)


def find(name: str) -> Benchmark:
    """The benchmark called ``name``; raises ``KeyError`` when there is none."""
    for bench in BENCHMARKS:
        if bench.name == name:
            return bench
    raise KeyError(name)
