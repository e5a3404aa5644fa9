"""The real corpus of the HNSW recall benchmark: HTML manuals ingested by the product.

Each directory is read by the product's ``TextLoader`` (its HTML reader, its default
child size, late chunking, indexer and model) into one collection, its ``.html`` files
only (Sphinx's ``_sources/`` copies of the reStructuredText are left out: the same text
twice). Ingest skips unchanged documents, so a stopped run resumes where it was.

The children's vectors, ids and texts are then cached as ``.npy``/``.json`` under the
cache directory, so every later measurement starts from the cache, not the model.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CachedCorpus", "html_files", "ingest_html", "load_cache"]

TABLE = "bench_recall_html"


def html_files(root: Path) -> list[Path]:
    """The ``.html`` files under ``root``, sorted, without Sphinx's ``_sources``."""
    return sorted(p for p in root.rglob("*.html") if "_sources" not in p.parts)


@dataclass
class CachedCorpus:
    """Every child of the collection: ``vectors`` (n, 384) float32, ``ids``, ``texts``."""

    vectors: np.ndarray
    ids: list[str]
    texts: list[str]
    sources: list[str]


async def ingest_html(dsn: str, dirs: Sequence[Path], model: Any, log: Any = print) -> str:
    """Ingest the ``.html`` files of ``dirs`` into the collection ``TABLE`` (resumable)."""
    from parrot_parents import PgVectorStore, TextLoader

    store = PgVectorStore(dsn=dsn, table=TABLE, embedding=model)
    await store.connect()
    lines = []
    try:
        # One bulk load over every directory: the HNSW index dropped, and built once at
        # the end (inserting into it row by row would take longer than the model).
        async with store.bulk_load() as load:
            for d in dirs:
                files = html_files(d)
                t = time.perf_counter()
                done = [0]

                def progress(
                    n: int, name: str = _label(d), done: list[int] = done, t: float = t
                ) -> None:
                    done[0] += n
                    log(f"[ingest {name}] {done[0]} documents, {time.perf_counter() - t:.0f} s")

                loader = TextLoader(files, root=d, id_prefix=f"{_label(d)}/", embedding=model)
                report = await loader.ingest(store, progress=progress, bulk_load=False)
                line = (
                    f"{_label(d)}: {len(files)} files, {report.children} children "
                    f"in {time.perf_counter() - t:.0f} s ({len(report.failed)} failed)"
                )
                log(f"[ingest] {line}")
                lines.append(line)
        log(f"[ingest] the collection's HNSW index built in {load.build_seconds:.0f} s")
    finally:
        await store.close()
    return "; ".join(lines)


def _label(d: Path) -> str:
    """``/usr/share/doc/python3.11/html`` -> ``python3.11``."""
    return d.parent.name if d.name == "html" else d.name


async def dump_cache(dsn: str, cache: Path) -> CachedCorpus:
    """Read every child (rows with a vector) of ``TABLE`` and cache it under ``cache``."""
    import asyncpg
    from pgvector.asyncpg import register_vector

    conn = await asyncpg.connect(dsn)
    try:
        await register_vector(conn)
        rows = await conn.fetch(
            f"SELECT id, document, cmetadata->>'source' AS source, embedding FROM {TABLE}"
            " WHERE embedding IS NOT NULL ORDER BY id"
        )
    finally:
        await conn.close()
    corpus = CachedCorpus(
        vectors=np.stack([_array(r["embedding"]) for r in rows]),
        ids=[r["id"] for r in rows],
        texts=[r["document"] for r in rows],
        sources=[r["source"] or "" for r in rows],
    )
    cache.mkdir(parents=True, exist_ok=True)
    np.save(cache / "children.npy", corpus.vectors)
    (cache / "children.json").write_text(
        json.dumps({"ids": corpus.ids, "texts": corpus.texts, "sources": corpus.sources}),
        encoding="utf-8",
    )
    return corpus


def load_cache(cache: Path) -> CachedCorpus | None:
    """The cached corpus, or None when there is none yet."""
    npy, meta = cache / "children.npy", cache / "children.json"
    if not (npy.exists() and meta.exists()):
        return None
    m = json.loads(meta.read_text(encoding="utf-8"))
    return CachedCorpus(np.load(npy), m["ids"], m["texts"], m["sources"])


def _array(value: Any) -> np.ndarray:
    """A vector as pgvector's asyncpg codec hands it over (an array or a ``Vector``)."""
    if isinstance(value, np.ndarray):
        return value.astype(np.float32)
    return np.asarray(value.to_numpy(), dtype=np.float32)
