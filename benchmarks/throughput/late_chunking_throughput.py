"""Throughput of late chunking vs embedding each child on its own, in tokens per second.

Both modes embed the same children of the same parents:

(a) late chunking: :class:`LateChunkingEmbedder` runs the model over each parent text
    (~4000 characters, in overlapping windows when longer than one) and pools one vector per
    child span (~400 characters, cut on whitespace);
(b) independent: :meth:`SentenceTransformerEmbeddings.embed_documents` embeds each child text.

Throughput counts the same tokens for both: the tokens of the source text (each parent tokenised
once, without special tokens), divided by wall time. The modes run in one process, alternating
(a/b, then b/a, ...), ``--repeats`` times after one untimed warm-up; medians are reported.

Corpus: ``../shared/benchmarks/chunking_eval/corpora/*.md`` relative to the repository root,
else ``examples/*.md`` / ``examples/*.txt``; without either the script prints why and exits 0.

Usage (from the repository root)::

    python -m benchmarks run late_chunking_throughput \
        --out benchmarks/reports/late_chunking_throughput.md
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from benchmarks.common import CHUNKING_EVAL, REPO_ROOT, REPORTS, command, cut_on_whitespace

SHARED_CORPORA = CHUNKING_EVAL / "corpora"
EXAMPLES = REPO_ROOT / "examples"


def find_corpus() -> list[Path]:
    files = sorted(SHARED_CORPORA.glob("*.md")) if SHARED_CORPORA.is_dir() else []
    if files:
        return files
    if EXAMPLES.is_dir():
        return sorted([*EXAMPLES.glob("*.md"), *EXAMPLES.glob("*.txt")])
    return []


def build_items(
    files: list[Path], parent_chars: int, child_chars: int, limit_chars: int | None
) -> list[tuple[str, list[tuple[int, int]]]]:
    """Parents (cut on whitespace) with their children's spans, relative to each parent."""
    items: list[tuple[str, list[tuple[int, int]]]] = []
    budget = limit_chars
    for path in files:
        text = path.read_text(encoding="utf-8")
        if budget is not None:
            text, budget = text[:budget], budget - min(budget, len(text))
        for start, end in cut_on_whitespace(text, parent_chars):
            parent = text[start:end]
            if parent.strip():
                items.append((parent, cut_on_whitespace(parent, child_chars)))
        if budget == 0:
            break
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPORTS / "late_chunking_throughput.md")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--parent-chars", type=int, default=4000)
    parser.add_argument("--child-chars", type=int, default=400)
    parser.add_argument("--window-overlap", type=int, default=64, help="tokens")
    parser.add_argument("--late-batch-size", type=int, default=8, help="windows per forward pass")
    parser.add_argument("--limit-chars", type=int, default=None, help="use only this much text")
    args = parser.parse_args(argv)

    files = find_corpus()
    if not files:
        print(f"skipped: no corpus in {SHARED_CORPORA} nor in {EXAMPLES}")
        return 0

    import torch

    from parrot_parents.embeddings.late_chunking import LateChunkingEmbedder
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings

    items = build_items(files, args.parent_chars, args.child_chars, args.limit_chars)
    children = [parent[s:e] for parent, spans in items for s, e in spans]

    embeddings = SentenceTransformerEmbeddings()
    late = LateChunkingEmbedder(
        embeddings, window_overlap_tokens=args.window_overlap, batch_size=args.late_batch_size
    )
    late.warm_up()
    tokenizer = embeddings.model[0].tokenizer
    # Same token count for both modes: the source text's tokens (parents, no special tokens).
    source_tokens = sum(
        len(ids)
        for ids in tokenizer(
            [p for p, _ in items], add_special_tokens=False, truncation=False, verbose=False
        )["input_ids"]
    )
    child_tokens = sum(
        len(ids)
        for ids in tokenizer(children, add_special_tokens=False, truncation=False, verbose=False)[
            "input_ids"
        ]
    )
    over_limit = sum(
        len(ids) + 2 > embeddings.model.max_seq_length
        for ids in tokenizer(children, add_special_tokens=False, verbose=False)["input_ids"]
    )

    def run_late() -> float:
        t0 = time.perf_counter()
        vectors = late.embed_spans(items)
        elapsed = time.perf_counter() - t0
        assert sum(map(len, vectors)) == len(children)
        return elapsed

    def run_independent() -> float:
        t0 = time.perf_counter()
        vectors = embeddings.embed_documents(children)
        elapsed = time.perf_counter() - t0
        assert len(vectors) == len(children)
        return elapsed

    # Untimed warm-up of both paths (thread pools, allocator, lazy imports).
    late.embed_spans(items[:2])
    embeddings.embed_documents(children[:16])

    load_before = os.getloadavg() if hasattr(os, "getloadavg") else None
    times: dict[str, list[float]] = {"late": [], "independent": []}
    before_positions = late.positions_encoded
    for r in range(args.repeats):
        order = ("late", "independent") if r % 2 == 0 else ("independent", "late")
        for mode in order:
            elapsed = run_late() if mode == "late" else run_independent()
            times[mode].append(elapsed)
            print(
                f"repeat {r + 1} {mode:<11} {elapsed:7.2f} s  {source_tokens / elapsed:8.0f} tok/s"
            )
    positions_per_run = (late.positions_encoded - before_positions) / args.repeats
    load_after = os.getloadavg() if hasattr(os, "getloadavg") else None
    load_desc = (
        f"1-minute load average {load_before[0]:.2f} before, {load_after[0]:.2f} after "
        "(other processes share the cores: compare the two modes, not absolute figures)"
        if load_before and load_after
        else "load average unavailable"
    )

    med = {mode: statistics.median(ts) for mode, ts in times.items()}
    tps = {mode: source_tokens / t for mode, t in med.items()}
    ratio = tps["late"] / tps["independent"]
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    corpus_desc = ", ".join(
        str(p.relative_to(REPO_ROOT.parent)) if p.is_relative_to(REPO_ROOT.parent) else str(p)
        for p in files
    )
    line = command(__name__, sys.argv[1:] if argv is None else argv)

    lines = [
        "# Late chunking throughput",
        "",
        f"Command: `{line}` (from the repository root)",
        "",
        "| mode | median time (s) | tokens/s (median) | runs (s) |",
        "|---|---:|---:|---|",
        *(
            f"| {name} | {med[mode]:.2f} | {tps[mode]:,.0f} | "
            f"{', '.join(f'{t:.2f}' for t in times[mode])} |"
            for mode, name in (
                ("late", "(a) late chunking, `LateChunkingEmbedder.embed_spans`"),
                ("independent", "(b) independent, `embed_documents` per child"),
            )
        ),
        "",
        f"**Ratio late / independent: {ratio:.2f}×** "
        "(tokens/s; > 1 means late chunking is faster).",
        "",
        "## Setup",
        "",
        f"- Corpus: {corpus_desc}"
        + (f" (first {args.limit_chars} characters)" if args.limit_chars else ""),
        f"- Parents: {len(items)} of ≤ {args.parent_chars} characters; children: {len(children)} "
        f"of ≤ {args.child_chars} characters, both cut on whitespace.",
        f"- Tokens counted for both modes: {source_tokens:,} (parents tokenised once, no special "
        f"tokens); the children tokenised separately give {child_tokens:,}; "
        f"{over_limit} child(ren) exceed the model's "
        f"{embeddings.model.max_seq_length}-token limit.",
        f"- Model: all-MiniLM-L6-v2 (bundled), window {late.window_tokens} tokens incl. special "
        f"tokens, overlap {args.window_overlap} tokens, {args.late_batch_size} windows per "
        f"forward pass; `embed_documents` batch size {embeddings.batch_size}.",
        f"- Late chunking ran {positions_per_run:,.0f} model positions per run "
        f"({positions_per_run / source_tokens:.2f}× the source tokens: window overlap and "
        "special tokens).",
        f"- Repeats: {args.repeats}, alternating order, after one untimed warm-up; medians.",
        f"- Machine: {os.cpu_count()} logical cores"
        + (f" ({affinity} usable by this process)" if affinity is not None else "")
        + f", torch {torch.__version__} on CPU with {torch.get_num_threads()} threads, "
        f"Python {platform.python_version()}, {platform.machine()}; {load_desc}.",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0
