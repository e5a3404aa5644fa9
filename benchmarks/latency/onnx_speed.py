"""Query and document embedding speed: torch against ONNX Runtime, same model, one run.

Why this is a benchmark and not a backend: sentence-transformers' own ONNX backend
(``SentenceTransformer(..., backend="onnx")``) needs ``optimum-onnx``, whose only release
(0.1.0) pins ``transformers<4.58``, while the sentence-transformers installed here (6.x)
needs ``transformers>=5``. Until that resolves, this script exports the model's
transformer with ``torch.onnx.export`` (a throwaway file), runs it with ``onnxruntime``
and pools like the model (mean over the attention mask, then L2), so the product can
decide on measurements.

Interleaved per round: single questions (p50 ms per query) and documents (400-character
slices of the dev corpora, in passes of 64; texts/s), for torch and ONNX Runtime.

    python -m benchmarks run onnx_speed [--rounds 3] [--queries 40] [--docs 128]
        [--out benchmarks/reports/onnx_speed.md]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import CHUNKING_EVAL, REPORTS, command

OUT = REPORTS / "onnx_speed.md"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def export(model: Any, path: Path) -> None:
    """The model's transformer as ONNX (dynamic batch and sequence axes)."""
    import torch

    transformer = model[0].auto_model.eval()

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = transformer

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )
            return out.last_hidden_state

    sample = model.tokenizer(["a b", "c d e"], padding=True, return_tensors="pt")
    torch.onnx.export(
        Hidden(),
        tuple(sample[k] for k in INPUTS),
        str(path),
        input_names=list(INPUTS),
        output_names=["last_hidden_state"],
        dynamic_axes={k: {0: "batch", 1: "seq"} for k in (*INPUTS, "last_hidden_state")},
        opset_version=17,
        dynamo=False,
    )


def onnx_encoder(embeddings: Any, path: Path) -> Any:
    """``encode(texts, batch_size) -> [n, d]`` on ONNX Runtime, pooled like the model."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    model = embeddings.model
    tokenizer, max_len = model.tokenizer, model.max_seq_length

    def encode(texts: list[str], batch_size: int = 64) -> np.ndarray:
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # as ST does
        out = np.empty((len(texts), embeddings.dimension), np.float32)
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            enc = tokenizer(
                [texts[i] for i in idx],
                padding=True,
                truncation=True,
                max_length=max_len,
                return_tensors="np",
            )
            hidden = session.run(None, {k: enc[k].astype(np.int64) for k in INPUTS})[0]
            mask = enc["attention_mask"][..., None].astype(np.float32)
            pooled = (hidden * mask).sum(1) / np.clip(mask.sum(1), 1e-9, None)
            out[idx] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return out

    return encode


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--docs", type=int, default=128)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings

    embeddings = SentenceTransformerEmbeddings()
    model = embeddings.model
    with (CHUNKING_EVAL / "questions.csv").open(encoding="utf-8") as f:
        queries = [r["question"] for r in csv.DictReader(f)][: args.queries]
    text = "".join(
        p.read_text(encoding="utf-8") for p in sorted((CHUNKING_EVAL / "corpora").glob("*"))
    )
    docs = [text[i : i + 400] for i in range(0, 400 * args.docs, 400)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        t = time.perf_counter()
        export(model, path)
        export_s = time.perf_counter() - t
        runners = {"torch": embeddings.encode, "onnx": onnx_encoder(embeddings, path)}
        reference = runners["torch"](queries + docs[:16])
        other = runners["onnx"](queries + docs[:16])
        min_cos = float((reference * other).sum(axis=1).min())
        per_query: dict[str, list[float]] = {k: [] for k in runners}
        docs_per_s: dict[str, list[float]] = {k: [] for k in runners}
        for _ in range(args.rounds):
            for name, encode in runners.items():
                for q in queries:
                    t = time.perf_counter()
                    encode([q])
                    per_query[name].append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                encode(docs, batch_size=64)
                docs_per_s[name].append(len(docs) / (time.perf_counter() - t))
    q50 = {k: statistics.median(v) for k, v in per_query.items()}
    d50 = {k: statistics.median(v) for k, v in docs_per_s.items()}
    lines = [
        "# Embedding speed: torch against ONNX Runtime (all-MiniLM-L6-v2, CPU)",
        "",
        f"Machine: {os.cpu_count()} cores shared with other jobs (load average "
        f"{os.getloadavg()[0]:.1f} at the end); OMP_WAIT_POLICY="
        f"{os.environ.get('OMP_WAIT_POLICY', 'unset')}. {args.rounds} interleaved rounds; "
        f"{len(queries)} questions one at a time; {len(docs)} 400-character slices of the "
        "dev corpora in passes of 64. Export (torch.onnx, opset 17): "
        f"{export_s:.1f} s. Same vectors: min cosine {min_cos:.6f} over "
        f"{len(reference)} texts.",
        "",
        "Command: `"
        + command(
            __name__,
            [
                "--rounds",
                str(args.rounds),
                "--queries",
                str(args.queries),
                "--docs",
                str(args.docs),
            ],
        )
        + "`",
        "",
        "| runtime | query p50 ms | documents/s (median of rounds) |",
        "|---|---:|---:|",
        *[f"| {k} | {q50[k]:.1f} | {d50[k]:.1f} |" for k in runners],
        "",
        f"Speed of ONNX Runtime over torch: queries {q50['torch'] / q50['onnx']:.2f}×, "
        f"documents {d50['onnx'] / d50['torch']:.2f}× (above 1: ONNX is faster).",
        "",
        "Not wired into the product: sentence-transformers' ONNX backend cannot be "
        "installed beside transformers 5 (optimum-onnx 0.1.0 pins transformers<4.58), and "
        "late chunking needs the torch model's token outputs in any case.",
    ]
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
