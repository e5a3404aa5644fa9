"""Late-chunking ingest throughput on a GPU, in fp16, against the model's FLOP bound.

Issue 11, part 6. One prepared run on a GPU machine; on a machine without CUDA it runs the
same code on the CPU in fp32 with a small input, so the script is tested before the GPU
time is spent.

What is measured, in one process (each figure the median of ``--repeats`` timed runs after
one warm-up):

(a) **product path**: :meth:`LateChunkingEmbedder.embed_spans` over the dev corpora: every
    parent text (~4000 characters) with its children (~400-character spans), exactly as the
    loader calls it; tokens/s counts the text tokens of the parents (special tokens and
    window overlap excluded), like ``benchmarks/throughput/late_chunking_throughput.py``;
(b) **forward passes only**: the same windows (same token ids, same padding, same batches)
    through the transformer, without tokenising or pooling, synchronised on the GPU;
(c) **the ceiling**: a large fp16 matrix product (8192^3) on the same GPU, in TFLOP/s.

FLOPs of a forward pass are counted from the model's config (BERT layout): per layer and
position, 2·(4·d² + 2·d·f) for the projections and the feed-forward block, plus 4·L·d for
the attention scores and their weighted sum over a window of L positions (padding counted,
since it is computed). The bound is ``achieved FLOP/s / ceiling``.

Usage::

    python -m benchmarks run gpu_late_chunking --model PATH --corpora DIR --out report.md
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from pathlib import Path

# The same spans as the CPU throughput benchmark.
from benchmarks.common import CHUNKING_EVAL, cut_on_whitespace


def items_of(corpora: Path, parent: int, child: int, copies: int) -> list[tuple[str, list]]:
    """``(parent_text, child_spans)`` for every ~``parent``-character parent of the corpora."""
    items = []
    for path in sorted(corpora.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for lo, hi in cut_on_whitespace(text, parent):
            body = text[lo:hi]
            items.append((body, cut_on_whitespace(body, child)))
    return items * copies


def flops_per_window(config: object, length: int) -> float:
    """Forward FLOPs of one BERT-style window of ``length`` positions (see module doc)."""
    d = int(config.hidden_size)  # type: ignore[attr-defined]
    f = int(config.intermediate_size)  # type: ignore[attr-defined]
    layers = int(config.num_hidden_layers)  # type: ignore[attr-defined]
    per_position = 2 * (4 * d * d + 2 * d * f) + 4 * length * d
    return float(layers * length * per_position)


def matmul_tflops(torch: object, device: str, dtype: object, n: int) -> float:
    """TFLOP/s of an ``n``³ matrix product (mean of 10 after 3 warm-ups)."""
    t = torch  # type: ignore[assignment]
    a = t.randn(n, n, device=device, dtype=dtype)
    b = t.randn(n, n, device=device, dtype=dtype)
    for _ in range(3):
        a @ b
    sync(t, device)
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    sync(t, device)
    return 10 * 2 * n**3 / (time.perf_counter() - start) / 1e12


def sync(torch: object, device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()  # type: ignore[attr-defined]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="model directory (default: bundled)")
    parser.add_argument(
        "--corpora",
        type=Path,
        default=CHUNKING_EVAL / "corpora",
    )
    parser.add_argument("--copies", type=int, default=None, help="corpus repeats")
    parser.add_argument("--batch-sizes", default=None, help="windows per forward pass")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)

    import torch

    from parrot_parents.embeddings.late_chunking import LateChunkingEmbedder, _window_bounds
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings

    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    dtype = torch.float16 if cuda else torch.float32
    copies = args.copies or (8 if cuda else 1)
    sizes = [int(s) for s in (args.batch_sizes or ("8,64,256" if cuda else "8")).split(",")]
    embeddings = SentenceTransformerEmbeddings(args.model, device=device)
    model = embeddings.model
    if cuda:
        model.half()
    items = items_of(args.corpora, 4000, 400, copies)
    if not cuda:
        items = items[:12]
    auto_model = model[0].auto_model
    config = auto_model.config
    lines = [
        "# Late chunking on the GPU (issue 11)",
        "",
        f"Device: {torch.cuda.get_device_name(0) if cuda else platform.processor() or 'cpu'}; "
        f"torch {torch.__version__}; dtype {str(dtype).replace('torch.', '')}; "
        f"{len(items)} parents ({copies} copies of the dev corpora), "
        f"{sum(len(s) for _, s in items)} child spans; median of {args.repeats} runs.",
        "",
        "| batch (windows) | product path tokens/s | forward only tokens/s | "
        "forward TFLOP/s | share of ceiling |",
        "|---:|---:|---:|---:|---:|",
    ]
    ceiling = matmul_tflops(torch, device, dtype, 8192 if cuda else 1024)
    for size in sizes:
        embedder = LateChunkingEmbedder(embeddings, batch_size=size)
        embedder.warm_up()
        embedder.embed_spans(items[: max(1, len(items) // 8)])  # warm-up
        product = []
        for _ in range(args.repeats):
            before = embedder.tokens_processed
            sync(torch, device)
            start = time.perf_counter()
            embedder.embed_spans(items)
            sync(torch, device)
            product.append((embedder.tokens_processed - before) / (time.perf_counter() - start))
        # The same windows, forward passes only (ids prepared outside the timed loop).
        spec = embedder._spec
        assert spec is not None
        enc = spec.tokenizer([t for t, _ in items], add_special_tokens=False, verbose=False)
        prefix, suffix = embedder._prefix, embedder._suffix
        capacity = embedder.window_tokens - len(prefix) - len(suffix)
        rows = []
        text_tokens = 0
        for ids in enc["input_ids"]:
            text_tokens += len(ids)
            for lo, hi in _window_bounds(len(ids), capacity, embedder.window_overlap_tokens):
                rows.append(prefix + list(ids[lo:hi]) + suffix)
        rows.sort(key=len, reverse=True)
        batches = []
        flops = 0.0
        for b in range(0, len(rows), size):
            chunk = rows[b : b + size]
            width = max(len(r) for r in chunk)
            ids_t = torch.zeros((len(chunk), width), dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for r, row in enumerate(chunk):
                ids_t[r, : len(row)] = torch.tensor(row)
                mask[r, : len(row)] = 1
            batches.append((ids_t.to(device), mask.to(device)))
            flops += len(chunk) * flops_per_window(config, width)
        forward = []
        with torch.no_grad():
            for ids_t, mask in batches[:2]:
                auto_model(input_ids=ids_t, attention_mask=mask)
            for _ in range(args.repeats):
                sync(torch, device)
                start = time.perf_counter()
                for ids_t, mask in batches:
                    auto_model(input_ids=ids_t, attention_mask=mask)
                sync(torch, device)
                forward.append(time.perf_counter() - start)
        seconds = statistics.median(forward)
        tflops = flops / seconds / 1e12
        lines.append(
            f"| {size} | {statistics.median(product):,.0f} | {text_tokens / seconds:,.0f} | "
            f"{tflops:.2f} | {tflops / ceiling:.1%} |"
        )
        print(lines[-1], flush=True)
    lines += [
        "",
        f"Ceiling: {ceiling:.0f} TFLOP/s, an 8192³ {str(dtype).replace('torch.', '')} matrix "
        "product on the same device in the same run."
        if cuda
        else f"Ceiling (CPU smoke run): {ceiling:.2f} TFLOP/s, a 1024³ fp32 matrix product.",
        f"FLOPs per window: BERT layout from the model config (d={config.hidden_size}, "
        f"f={config.intermediate_size}, {config.num_hidden_layers} layers), padding counted.",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out is not None:
        args.out.write_text(report, encoding="utf-8")
    return 0
