"""Latency added per query by CrossEncoderReranker (p50 / p95), written as a markdown report.

Each query reranks N candidate passages of ~450 characters (N = 20 and 40 by default), after a
few untimed warm-up calls. Only ``await reranker.rerank(query, candidates)`` is timed: that is
the latency a bot adds on top of retrieval. Passages come from
``../shared/benchmarks/chunking_eval/corpora/*.md`` (and queries from its ``questions.csv``) when
that folder exists, else from generated text.

By default the model is the tiny random cross-encoder of
:func:`parrot_parents.rerankers.testing.build_tiny_cross_encoder`, so the figures measure the
pipeline (tokenisation, batching, thread hop) plus a very small forward pass, and are a lower
bound. Pass ``--model DIR`` to time a real cross-encoder.

    python -m benchmarks run reranker_latency [--model DIR] [--candidates 20 40] [--queries 50]
        [--out benchmarks/reports/reranker_latency.md]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import datetime as dt
import os
import platform
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from langchain_core.documents import Document

from benchmarks.common import CHUNKING_EVAL, REPO_ROOT, REPORTS, command
from parrot_parents.rerankers import CrossEncoderReranker
from parrot_parents.rerankers.testing import build_tiny_cross_encoder

PASSAGE_CHARS = 450


@dataclass
class Row:
    candidates: int
    queries: int
    p50_ms: float
    p95_ms: float
    mean_ms: float
    max_ms: float
    mean_pair_tokens: float


def load_passages(rng: random.Random, count: int) -> tuple[list[str], str]:
    """Return ``count`` passages of ~PASSAGE_CHARS characters and a description of the source."""
    files = sorted((CHUNKING_EVAL / "corpora").glob("*.md"))
    if files:
        text = " ".join(f.read_text(encoding="utf-8") for f in files)
        source = ", ".join(str(f.relative_to(REPO_ROOT.parent)) for f in files)
    else:
        words = [
            "parrot", "vector", "index", "query", "parent", "child", "budget", "context",
            "token", "chunk", "retrieval", "rerank", "model", "score", "database", "passage",
        ]  # fmt: skip
        text = " ".join(rng.choice(words) for _ in range(count * 80))
        source = "generated words (corpora folder not found)"
    text = re.sub(r"\s+", " ", text)
    passages = []
    for _ in range(count):
        start = rng.randrange(0, max(1, len(text) - PASSAGE_CHARS * 2))
        # Start and end on word boundaries so the tokenizer sees whole words.
        start = text.find(" ", start) + 1
        end = text.rfind(" ", start, start + PASSAGE_CHARS + 20)
        passages.append(text[start : end if end > start else start + PASSAGE_CHARS])
    return passages, source


def load_queries(rng: random.Random, count: int, passages: list[str]) -> tuple[list[str], str]:
    questions = CHUNKING_EVAL / "questions.csv"
    if questions.is_file():
        with questions.open(encoding="utf-8", newline="") as fh:
            found = [row["question"] for row in csv.DictReader(fh) if row.get("question")]
        if found:
            return [rng.choice(found) for _ in range(count)], str(
                questions.relative_to(REPO_ROOT.parent)
            )
    # Fallback: the first words of random passages, question-sized.
    return [" ".join(rng.choice(passages).split()[:12]) + "?" for _ in range(count)], "generated"


async def measure(
    reranker: CrossEncoderReranker,
    queries: list[str],
    passages: list[str],
    candidates: int,
    warmup: int,
    rng: random.Random,
) -> Row:
    pools = [[Document(page_content=p) for p in rng.sample(passages, candidates)] for _ in queries]
    for i in range(warmup):
        await reranker.rerank(queries[i % len(queries)], pools[i % len(pools)])
    timings = []
    for query, docs in zip(queries, pools, strict=True):
        start = time.perf_counter()
        await reranker.rerank(query, docs)
        timings.append((time.perf_counter() - start) * 1000.0)
    tokenizer = reranker.model.tokenizer
    lengths = [
        min(len(tokenizer(q, d.page_content)["input_ids"]), reranker.max_length)
        for q, docs in zip(queries[:5], pools[:5], strict=True)
        for d in docs
    ]
    arr = np.asarray(timings)
    return Row(
        candidates=candidates,
        queries=len(timings),
        p50_ms=float(np.percentile(arr, 50)),
        p95_ms=float(np.percentile(arr, 95)),
        mean_ms=float(arr.mean()),
        max_ms=float(arr.max()),
        mean_pair_tokens=float(np.mean(lengths)),
    )


def describe_model(reranker: CrossEncoderReranker, tiny: bool) -> str:
    config = reranker.model.config
    params = sum(p.numel() for p in reranker.model.parameters())
    shape = (
        f"{getattr(config, 'model_type', '?')}, hidden {getattr(config, 'hidden_size', '?')}, "
        f"{getattr(config, 'num_hidden_layers', '?')} layers, {params / 1e6:.2f} M parameters"
    )
    if tiny:
        return f"tiny random cross-encoder from `build_tiny_cross_encoder` ({shape})"
    return f"`{reranker.model_name}` ({shape})"


def render(
    rows: list[Row],
    *,
    model: str,
    reranker: CrossEncoderReranker,
    passage_source: str,
    query_source: str,
    mean_chars: float,
    warmup: int,
    command: str,
) -> str:
    import sentence_transformers
    import torch
    import transformers

    lines = [
        "# Reranker latency",
        "",
        f"Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M UTC} by `{command}`.",
        "",
        "Added latency per query of `CrossEncoderReranker.rerank` (scoring every candidate, then "
        "sorting), timed around the `await` after "
        f"{warmup} untimed warm-up calls. Retrieval itself is not included.",
        "",
        "| candidates | queries | p50 ms | p95 ms | mean ms | max ms | p50 ms / candidate "
        "| mean tokens / pair |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.candidates} | {r.queries} | {r.p50_ms:.1f} | {r.p95_ms:.1f} | {r.mean_ms:.1f} "
            f"| {r.max_ms:.1f} | {r.p50_ms / r.candidates:.2f} | {r.mean_pair_tokens:.0f} |"
        )
    lines += [
        "",
        "## Setup",
        "",
        f"- Model: {model}",
        f"- Reranker: batch_size={reranker.batch_size}, max_length={reranker.max_length}, "
        f"device=`{reranker.device}`",
        f"- Passages: {mean_chars:.0f} characters on average, from {passage_source}",
        f"- Queries: from {query_source}",
        f"- CPU cores (`os.cpu_count()`): {os.cpu_count()}; torch threads: "
        f"{torch.get_num_threads()}",
        f"- Platform: {platform.platform()}, Python {platform.python_version()}, torch "
        f"{torch.__version__}, transformers {transformers.__version__}, sentence-transformers "
        f"{sentence_transformers.__version__}",
        "",
        "The tiny model has random weights: its scores are meaningless and its forward pass is "
        "far cheaper than a real cross-encoder's, so these figures are a lower bound (the "
        "fixed cost of tokenising, batching and running off the event loop). A real model's "
        "latency grows with its layers and hidden size and with the candidates' token count; "
        "time it on your hardware with:",
        "",
        "```bash",
        "python -m benchmarks run reranker_latency --model /path/to/cross-encoder "
        "--candidates 20 40",
        "```",
        "",
        "## Measuring quality with a real model",
        "",
        "Latency is only half of the trade-off; whether reranking helps depends on the model and "
        "the corpus. Run the retrieval evaluation twice on the same corpus and questions, "
        "without and with a reranker, and compare the reported metrics:",
        "",
        "```bash",
        "parrot-parents eval ...                     # baseline, no reranking",
        "parrot-parents eval ... --reranker MODEL    # same run, candidates reranked by MODEL",
        "# e.g. --reranker cross-encoder/ms-marco-MiniLM-L-6-v2 (if in the HF cache)",
        "#   or --reranker /path/to/local/cross-encoder",
        "```",
        "",
        "`...` stands for the usual eval arguments (corpus, questions, store); see "
        "`parrot-parents eval --help` (that command is maintained separately). `MODEL` is a "
        "local directory or a Hugging Face id that is already in the local HF cache: models "
        "are loaded offline and never downloaded, and a "
        "missing one fails with `ModelLoadError` naming the paths searched. The model must have "
        "a single output logit (`num_labels=1`), as the `cross-encoder/ms-marco-*` models do. "
        "A tiny random model (as used above) gives meaningless quality numbers.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(_main(argv))


async def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="cross-encoder directory or cached HF id (default: tiny)")
    parser.add_argument("--candidates", type=int, nargs="+", default=[20, 40])
    parser.add_argument("--queries", type=int, default=50, help="timed queries per size")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls per size")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=REPORTS / "reranker_latency.md")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)

    with tempfile.TemporaryDirectory(prefix="tiny-cross-encoder-") as tmp:
        model = args.model or str(build_tiny_cross_encoder(Path(tmp) / "model", seed=args.seed))
        reranker = CrossEncoderReranker(
            model, batch_size=args.batch_size, max_length=args.max_length, device=args.device
        )
        reranker.warm_up()
        passages, passage_source = load_passages(rng, max(400, 4 * max(args.candidates)))
        queries, query_source = load_queries(rng, args.queries, passages)
        rows = []
        for n in args.candidates:
            row = await measure(reranker, queries, passages, n, args.warmup, rng)
            print(
                f"{n:>3} candidates: p50 {row.p50_ms:.1f} ms, p95 {row.p95_ms:.1f} ms "
                f"({row.queries} queries)",
                flush=True,
            )
            rows.append(row)
        report = render(
            rows,
            model=describe_model(reranker, tiny=args.model is None),
            reranker=reranker,
            passage_source=passage_source,
            query_source=query_source,
            mean_chars=float(np.mean([len(p) for p in passages])),
            warmup=args.warmup,
            command=command(__name__, sys.argv[1:] if argv is None else argv),
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0
