# ruff: noqa: E501 - the Markdown tables are written as they appear
"""The bulk writer at scale against raw COPY and today's writer (issue 11, part 2).

One run, every variant in its own subprocess (so one variant's peak memory does not hide
another's), on the same synthetic rows: ``--rows`` children (default 100,000) in documents
of one parent and ~10 children each (so 110,000 rows at the default), random unit float32
vectors of 384 dimensions, children of ~40 words drawn from a fixed vocabulary (so the
lexical index and its statistics do real work). Each variant makes all its rows first and
holds them (as a loader holds what it embedded), then starts its timer; the peak memory
is that of holding and writing them. ``lists_memory`` only holds the same rows with the
vectors as Python lists, as today's loader did.

Variants:

* ``copy``: asyncpg ``copy_records_to_table`` (binary, pgvector's codec) of the same rows,
  one COPY per batch, into the collection's own table with its HNSW index dropped (the
  btree/GIN indexes and the lexical statistics triggers stay): the ceiling for our writer.
* ``copy_bare``: the same COPY into a bare table (``LIKE`` the collection: no index, no
  trigger), for scale.
* ``ours``: ``PgVectorStore.bulk_load()`` (HNSW index deferred) around
  ``replace_documents`` of ``--batch-docs`` documents per transaction, then the index build.
* ``today``: the writer of the baseline checkout (``--baseline``, on ``PYTHONPATH``),
  ``replace_document`` per document with vectors as Python lists (as its loader passed
  them), HNSW index present from the start; on ``--today-rows`` children (default 10,000)
  and scaled linearly to ``--rows`` (HNSW inserts get slower as the graph grows, so
  scaling up flatters today's writer; run it on as many rows as ours to settle it).

Then a real-text ingest of the shared dev corpora (``chunking_eval/corpora``) through the
loader with the real model, as ``parrot-parents ingest`` runs it (bulk load into a new
collection): source tokens per second, and the share of wall time outside the model
(the model's busy time is measured around its forward passes).

    python -m benchmarks run scale_write [--rows 100000] [--today-rows 10000] [--batch-docs 32]

Needs ``PARROT_PARENTS_DSN`` or starts the embedded server (``PARROT_PARENTS_DATA_DIR``).
Writes ``benchmarks/reports/scale_write.md`` and prints the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.common import CHUNKING_EVAL, REPO_ROOT, REPORTS, child, command, commit_of

CORPORA = CHUNKING_EVAL / "corpora"
DIM = 384
CHILDREN_PER_PARENT = 10
WORDS = [
    "pump",
    "seal",
    "water",
    "valve",
    "pressure",
    "warranty",
    "leave",
    "salary",
    "notice",
    "period",
    "contract",
    "party",
    "payment",
    "invoice",
    "mileage",
    "car",
    "staff",
    "holiday",
    "report",
    "safety",
    "engine",
    "filter",
    "oil",
    "manual",
    "service",
    "repair",
    "parrot",
    "seed",
    "cage",
    "river",
    "bridge",
    "station",
    "train",
    "ticket",
    "policy",
    "claim",
    "insurance",
    "doctor",
    "patient",
    "record",
    "court",
    "judge",
    "law",
    "tax",
    "rate",
    "bank",
    "loan",
]


# -- the synthetic rows ----------------------------------------------------------------


def batches(children: int, batch_docs: int, seed: int = 7) -> Iterator[list[tuple[str, list, Any]]]:
    """``[(document_id, Documents, vectors (n, DIM) float32 with NaN-free None rows)]``
    per batch of ``batch_docs`` documents; the same rows for the same arguments."""
    import numpy as np
    from langchain_core.documents import Document

    documents = (children + CHILDREN_PER_PARENT - 1) // CHILDREN_PER_PARENT
    for first in range(0, documents, batch_docs):
        rng = np.random.default_rng([seed, first])
        out = []
        for d in range(first, min(documents, first + batch_docs)):
            n = min(CHILDREN_PER_PARENT, children - d * CHILDREN_PER_PARENT)
            words = rng.integers(0, len(WORDS), size=(n, 40))
            texts = [" ".join(WORDS[w] for w in row) + "." for row in words]
            body = " ".join(texts)
            doc_id = f"doc{d:07d}"
            parent_id = f"{doc_id}#doc:0-{len(body)}"
            docs = [
                Document(
                    id=parent_id,
                    page_content=body,
                    metadata={
                        "document_id": doc_id,
                        "is_full_document": True,
                        "start_index": 0,
                        "end_index": len(body),
                    },
                )
            ]
            start = 0
            for i, t in enumerate(texts):
                docs.append(
                    Document(
                        id=f"{doc_id}#c:{start}-{start + len(t)}",
                        page_content=t,
                        metadata={
                            "document_id": doc_id,
                            "parent_document_id": parent_id,
                            "is_chunk": True,
                            "chunk_index": i,
                            "start_index": start,
                            "end_index": start + len(t),
                        },
                    )
                )
                start += len(t) + 1
            vectors = rng.standard_normal((n, DIM), dtype=np.float32)
            vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
            out.append((doc_id, docs, vectors))
        yield out


def peak_rss_mb() -> float:
    """This process's peak resident set (``ru_maxrss`` is in kB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- the variants (each in its own process) ---------------------------------------------


async def _store(dsn: str, table: str) -> Any:
    from parrot_parents.stores.postgres import PgVectorStore

    # No model is needed: vectors are given, the dimension too.
    store = PgVectorStore(dsn=dsn, table=table, dimension=DIM, embedding=_NoModel())  # type: ignore[arg-type]
    await store.connect()
    return store


class _NoModel:
    """Stands in for the model: every vector is given, so it is never called."""

    dimension = DIM
    model_name = "none"

    def warm_up(self) -> None:
        pass


async def variant_copy(dsn: str, table: str, children: int, batch_docs: int, bare: bool) -> dict:
    import asyncpg
    import numpy as np
    from pgvector.asyncpg import register_vector

    store = await _store(dsn, table)
    target = table
    async with store.engine.begin() as conn:
        await conn.execute(_text(f'DROP INDEX "{table}_embedding_hnsw"'))
        if bare:
            target = f"{table}_bare"
            await conn.execute(_text(f'CREATE TABLE "{target}" (LIKE "{table}")'))
    conn = await asyncpg.connect(store_dsn(dsn))
    await register_vector(conn)
    data = list(batches(children, batch_docs))  # held, as a loader holds its batches
    rows = 0
    start = time.perf_counter()
    for batch in data:
        records = []
        for _, docs, vectors in batch:
            records.append((docs[0].id, None, docs[0].page_content, json.dumps(docs[0].metadata)))
            for d, v in zip(docs[1:], vectors, strict=True):
                records.append((d.id, np.asarray(v), d.page_content, json.dumps(d.metadata)))
        async with conn.transaction():
            await conn.copy_records_to_table(
                target, records=records, columns=["id", "embedding", "document", "cmetadata"]
            )
        rows += len(records)
    seconds = time.perf_counter() - start
    await conn.close()
    await store.close()
    return {"rows": rows, "load_s": seconds}


async def variant_ours(dsn: str, table: str, children: int, batch_docs: int) -> dict:
    store = await _store(dsn, table)
    data = list(batches(children, batch_docs))  # held, as a loader holds its batches
    rows = 0
    start = time.perf_counter()
    async with store.bulk_load() as load:
        for batch in data:
            await store.replace_documents(
                [(doc_id, docs, [None, *vectors], None) for doc_id, docs, vectors in batch]
            )
            rows += sum(len(docs) for _, docs, _ in batch)
        loaded = time.perf_counter() - start
    total = time.perf_counter() - start
    assert await store.vector_index_exists()
    await store.close()
    return {"rows": rows, "load_s": loaded, "build_s": load.build_seconds, "total_s": total}


async def variant_today(dsn: str, table: str, children: int, batch_docs: int) -> dict:
    from parrot_parents.stores.postgres import PgVectorStore

    store = PgVectorStore(dsn=dsn, table=table, dimension=DIM, embedding=_NoModel())  # type: ignore[arg-type]
    await store.connect()
    data = _as_lists(batches(children, batch_docs))
    rows = 0
    start = time.perf_counter()
    for batch in data:
        for doc_id, docs, lists in batch:
            await store.replace_document(doc_id, docs, embeddings=lists)
            rows += len(docs)
    seconds = time.perf_counter() - start
    await store.close()
    return {"rows": rows, "load_s": seconds, "total_s": seconds}


def _as_lists(source: Iterator[list[tuple[str, list, Any]]]) -> list:
    """The batches with Python lists of floats as vectors, as today's loader held them
    (``ChunkInfo.embedding = list(vector)``)."""
    return [
        [(d, docs, [None, *(list(map(float, v)) for v in vectors)]) for d, docs, vectors in batch]
        for batch in source
    ]


async def variant_lists_memory(children: int, batch_docs: int) -> dict:
    """No write: the peak memory of holding the rows with list vectors (today's form)."""
    data = _as_lists(batches(children, batch_docs))
    rows = sum(len(docs) for batch in data for _, docs, _ in batch)
    return {"rows": rows, "load_s": float("nan")}


def _text(sql: str) -> Any:
    from sqlalchemy import text

    return text(sql)


def store_dsn(dsn: str) -> str:
    return dsn.replace("postgresql+asyncpg://", "postgresql://")


def run_variant(args: argparse.Namespace) -> None:
    fn = {
        "copy": lambda: variant_copy(args.dsn, args.table, args.rows, args.batch_docs, False),
        "copy_bare": lambda: variant_copy(args.dsn, args.table, args.rows, args.batch_docs, True),
        "ours": lambda: variant_ours(args.dsn, args.table, args.rows, args.batch_docs),
        "today": lambda: variant_today(args.dsn, args.table, args.rows, args.batch_docs),
        "lists_memory": lambda: variant_lists_memory(args.rows, args.batch_docs),
    }[args.variant]
    result = asyncio.run(fn())
    result["peak_rss_mb"] = peak_rss_mb()
    import parrot_parents

    result["code"] = commit_of(Path(parrot_parents.__file__).resolve().parent.parent)
    print("RESULT " + json.dumps(result))


def spawn(variant: str, dsn: str, rows: int, batch_docs: int, src: Path | None) -> dict:
    """Run ``variant`` in a child process on the product code of ``src`` (None: this tree)."""
    table = f"sw_{variant}_{uuid.uuid4().hex[:8]}"
    argv = ["--variant", variant, "--dsn", dsn, "--table", table, "--rows", str(rows)]
    cmd, env = child(__name__, [*argv, "--batch-docs", str(batch_docs)], src)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=src or REPO_ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{done.stderr[-3000:]}")
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
    out = json.loads(line[len("RESULT ") :])
    out["table"] = table
    return out


# -- the real-text ingest -----------------------------------------------------------------


async def real_ingest(dsn: str) -> dict | None:
    from parrot_parents.loaders.text import TextLoader
    from parrot_parents.stores.postgres import PgVectorStore

    files = sorted(CORPORA.glob("*.md")) if CORPORA.is_dir() else []
    if not files:
        return None
    store = PgVectorStore(dsn=dsn, table=f"sw_real_{uuid.uuid4().hex[:8]}")
    loader = TextLoader([str(f) for f in files], embedding=store.embedding)
    loader.processor.warm_up()  # the model's load is not ingest time
    late = loader.processor._late
    busy = [0.0]
    inner = late.embed_spans

    def timed(items: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(items)
        finally:
            busy[0] += time.perf_counter() - t0

    late.embed_spans = timed  # type: ignore[method-assign]
    await store.connect()
    docs = loader.load()
    tokenizer = store.embedding.model.tokenizer
    tokens = sum(
        len(ids)
        for ids in tokenizer(
            [d.page_content for d in docs], add_special_tokens=False, verbose=False
        )["input_ids"]
    )
    start = time.perf_counter()
    rows = await loader.chunk_documents(docs, vector_store=store, bulk_load=True)
    wall = time.perf_counter() - start
    await store.drop()
    await store.close()
    return {
        "documents": len(docs),
        "rows": len(rows),
        "tokens": tokens,
        "wall_s": wall,
        "model_s": busy[0],
        "build_s": loader.report.index_build_seconds,
    }


# -- the report ---------------------------------------------------------------------------


def report(args: argparse.Namespace, res: dict[str, dict], real: dict | None) -> str:
    copy, bare, ours, today = res["copy"], res["copy_bare"], res["ours"], res["today"]
    lists = res["lists_memory"]
    rate = {k: v["rows"] / v["load_s"] for k, v in res.items() if k != "lists_memory"}
    factor = ours["rows"] / today["rows"]
    today_total = today["total_s"] * factor
    # HNSW inserts slow down as the graph grows: scaling up flatters today, scaling down
    # (today ran on more rows) flatters ours, by less than the rows' difference.
    leaning = (
        "flatters today: HNSW inserts slow down as the graph grows"
        if factor > 1
        else "flatters ours a little: the rows left out were today's dearest"
    )
    lines = [
        "# The bulk writer at scale (issue 11, part 2)",
        "",
        f"`{command(__name__, ['--rows', str(args.rows), '--today-rows', str(args.today_rows)])} "
        f"--batch-docs {args.batch_docs}` on {platform.machine()}, {os.cpu_count()} CPU(s) "
        "(shared), the embedded PostgreSQL; one run, each variant in its own process.",
        "",
        f"{ours['rows']:,} rows: {args.rows:,} children of ~40 words in documents of one "
        f"parent and {CHILDREN_PER_PARENT} children, random unit float32 vectors of {DIM} "
        f"dimensions; {args.batch_docs} documents per transaction.",
        "",
        "| variant | rows | load s | rows/s | × raw COPY | index build s | end to end s | peak RSS MB |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        f"| raw COPY into the collection table (HNSW dropped; btree/GIN + lexical triggers kept) | {copy['rows']:,} | {copy['load_s']:.1f} | {rate['copy']:,.0f} | 1.00 | | | {copy['peak_rss_mb']:.0f} |",
        f"| raw COPY into a bare table (no index, no trigger) | {bare['rows']:,} | {bare['load_s']:.1f} | {rate['copy_bare']:,.0f} | {rate['copy_bare'] / rate['copy']:.2f} | | | {bare['peak_rss_mb']:.0f} |",
        f"| **ours**: `bulk_load()` + `replace_documents` | {ours['rows']:,} | {ours['load_s']:.1f} | {rate['ours']:,.0f} | **{rate['ours'] / rate['copy']:.2f}** | {ours['build_s']:.1f} | {ours['total_s']:.1f} | **{ours['peak_rss_mb']:.0f}** |",
        f"| today (b1e0ef3): `replace_document` per document, HNSW present, lists | {today['rows']:,} | {today['load_s']:.1f} | {rate['today']:,.0f} | {rate['today'] / rate['copy']:.2f} | (in the load) | {today['total_s']:.1f} | {today['peak_rss_mb']:.0f} (at {today['rows']:,} rows) |",
        f"| today, scaled linearly to {ours['rows']:,} rows (×{factor:.2f}; {leaning}) | {ours['rows']:,} | | | | | {today_total:.0f} | |",
        f"| holding the same {lists['rows']:,} rows with vectors as Python lists (today's form; no write) | {lists['rows']:,} | | | | | | {lists['peak_rss_mb']:.0f} |",
        "",
        f"- Ours / raw COPY (same table): **{rate['ours'] / rate['copy']:.2f}×** (target ≥ 0.7×).",
        f"- End to end, {ours['rows']:,} rows, index included: ours {ours['total_s']:.0f} s against today's "
        f"{today_total:.0f} s (scaled from {today['rows']:,} rows): **{today_total / ours['total_s']:.1f}× faster** (target ≥ 5×).",
        f"- Index build after the load: {ours['build_s']:.1f} s "
        f"(`maintenance_work_mem` sized by `maintenance_work_mem_kb`).",
        f"- Peak RSS of the writing process, all {ours['rows']:,} rows held (float32 arrays): {ours['peak_rss_mb']:.0f} MB "
        f"(target ≤ 700 MB), against {lists['peak_rss_mb']:.0f} MB to hold them with list vectors.",
        "- Every variant's timer starts after its rows are made; `load s` is the writes alone.",
    ]
    if real is not None:
        outside = 1 - real["model_s"] / real["wall_s"]
        lines += [
            "",
            "## Real text, real model",
            "",
            "The shared dev corpora ingested through `TextLoader.chunk_documents(..., bulk_load=True)` "
            "(what `parrot-parents ingest` runs into a new collection), late chunking with "
            "all-MiniLM-L6-v2 on CPU, the model's load excluded.",
            "",
            "| documents | rows | source tokens | wall s | model busy s | tokens/s | wall outside the model | index build s |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| {real['documents']} | {real['rows']:,} | {real['tokens']:,} | {real['wall_s']:.1f} | "
            f"{real['model_s']:.1f} | {real['tokens'] / real['wall_s']:,.0f} | {outside:.1%} | "
            f"{real['build_s']:.2f} |",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="children (default 100000)")
    parser.add_argument(
        "--today-rows", type=int, default=10_000, help="children for today's writer"
    )
    parser.add_argument("--batch-docs", type=int, default=32, help="documents per transaction")
    parser.add_argument("--out", type=Path, default=REPORTS / "scale_write.md")
    parser.add_argument("--no-real", action="store_true", help="skip the real-text ingest")
    parser.add_argument("--baseline", type=Path, help="the older checkout (today's writer)")
    parser.add_argument("--variant", help=argparse.SUPPRESS)
    parser.add_argument("--dsn", help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.variant:
        run_variant(args)
        return 0
    if args.baseline is None:
        parser.error("--baseline is needed: the older checkout whose writer is `today`")

    from parrot_parents.embedded.server import resolve_dsn

    dsn = resolve_dsn(None)
    res: dict[str, dict] = {}
    for variant in ("copy", "copy_bare", "ours"):
        res[variant] = spawn(variant, dsn, args.rows, args.batch_docs, None)
        print(variant, res[variant], file=sys.stderr)
    res["today"] = spawn("today", dsn, args.today_rows, args.batch_docs, args.baseline)
    print("today", res["today"], file=sys.stderr)
    res["lists_memory"] = spawn("lists_memory", dsn, args.rows, args.batch_docs, None)
    print("lists_memory", res["lists_memory"], file=sys.stderr)
    real = None if args.no_real else asyncio.run(real_ingest(dsn))
    text = report(args, res, real)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return 0
