"""A ``kill -9`` in the middle of an ingest leaves only whole documents, and running the same
command again completes the collection."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from parrot_parents.loaders.hierarchy import LateChunkingProcessor
from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import unique_table
from tests.loaders.test_hierarchy import make_text

N_FILES = 12


class _NoModel:
    """Only the structure is needed to know how many rows a whole document has."""


def _expected_rows(folder: Path) -> dict[str, int]:
    proc = LateChunkingProcessor(embedding=_NoModel())  # type: ignore[arg-type]
    out = {}
    for f in sorted(folder.iterdir()):
        h = proc.build_hierarchy(f.read_text(encoding="utf-8"), f.name)
        # The default strategy (contextual:extractive) adds one indexed row per child,
        # written in the same transaction as the document's hierarchy.
        out[f.name] = len(h.parents) + 2 * len(h.children)
    return out


async def _rows_per_document(store: PgVectorStore) -> dict[str, int]:
    from sqlalchemy import func, select

    from parrot_parents.stores.postgres.collections.schema import meta_field

    engine, table = await store.ready()
    doc = meta_field(table, "document_id")
    async with engine.connect() as conn:
        rows = (await conn.execute(select(doc, func.count()).group_by(doc))).all()
    return {str(d): int(n) for d, n in rows}


def _ingest(folder: Path, table: str, dsn: str) -> subprocess.Popen[str]:
    args = ["ingest", str(folder), "--collection", table, "--dsn", dsn]
    return subprocess.Popen(
        [sys.executable, "-m", "parrot_parents", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a suite started in the background by a script (``cmd &``
        # without job control) ignores SIGINT, and a child would inherit that and never
        # see the Ctrl-C sent to it.
        preexec_fn=_interruptible,
    )


def _interruptible() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _write_files(folder: Path) -> None:
    for i in range(N_FILES):
        (folder / f"doc{i:02d}.md").write_text(make_text(5000, seed=i), encoding="utf-8")


async def _ingest_under_way(folder: Path, store: PgVectorStore, dsn: str) -> subprocess.Popen[str]:
    """An ``ingest`` of ``folder`` in a child process, once it has stored some rows (and
    before it has finished)."""
    proc = _ingest(folder, store.table, dsn)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        if await _rows_per_document(store):
            break
        await asyncio.sleep(0.02)
    assert proc.poll() is None, "the ingest finished before it could be stopped"
    return proc


async def test_kill_9_during_ingest_then_rerun(
    tmp_path: Path, pg_dsn: str, embeddings: object
) -> None:
    _write_files(tmp_path)
    expected = _expected_rows(tmp_path)
    table = unique_table("kill")
    store = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings)  # type: ignore[arg-type]
    await store.connect()
    try:
        proc = await _ingest_under_way(tmp_path, store, pg_dsn)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        stored = await _rows_per_document(store)
        assert 0 < len(stored) < N_FILES
        for doc_id, n in stored.items():
            assert n == expected[doc_id], f"{doc_id}: {n} of {expected[doc_id]} rows"
        rerun = _ingest(tmp_path, table, pg_dsn)
        _, err = rerun.communicate(timeout=300)
        assert rerun.returncode == 0, err
        assert await _rows_per_document(store) == expected
    finally:
        await store.drop()
        await store.close()


async def test_ctrl_c_during_ingest_says_interrupted_once(
    tmp_path: Path, pg_dsn: str, embeddings: object
) -> None:
    _write_files(tmp_path)
    table = unique_table("ctrlc")
    store = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings)  # type: ignore[arg-type]
    await store.connect()
    try:
        proc = await _ingest_under_way(tmp_path, store, pg_dsn)
        os.kill(proc.pid, signal.SIGINT)  # what Ctrl-C sends
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert err.count("interrupted") == 1, err
        assert "document(s) were stored, each one whole" in err
    finally:
        await store.drop()
        await store.close()
