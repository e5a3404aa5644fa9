"""Shared fixtures: a real PostgreSQL with pgvector, and the real embedding model.

The database is ``$PARROT_PARENTS_TEST_DSN`` when set, otherwise an embedded PostgreSQL
(:func:`parrot_parents.embedded.server.get_server`) started once per test session in a
temporary directory and deleted after (under pytest-xdist, once per worker: each worker
is a session of its own).
Every test that writes to a collection gets its own uniquely named table; tests that
only read the example corpus share one ingest of it (:func:`example_corpus`).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# pymilvus (the Milvus tests) starts gRPC threads; gRPC's fork handlers then crash the
# children that later tests fork (pg_ctl of a private server died with SIGSEGV once).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.search_options import HNSWQueryOptions

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_BENCH = REPO_ROOT.parent / "shared" / "benchmarks"
EXAMPLES = REPO_ROOT / "examples" / "corpus"


def server_temp_dir(prefix: str) -> Path:
    """A new temporary directory for an embedded server's data directory. Run by root the
    server is a system user, which must enter it; the library opens no directory it did
    not make, so the test opens its own (0711: enter, not list)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    path.chmod(0o711)
    return path


@pytest.fixture
def server_dir() -> Iterator[Path]:
    """A :func:`server_temp_dir`, deleted after the test (a server in it stopped)."""
    path = server_temp_dir("parrot-parents-srv-")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """DSN of the test server (external or embedded)."""
    external = os.environ.get("PARROT_PARENTS_TEST_DSN")
    if external:
        yield external
        return
    from parrot_parents.embedded.server import get_server, release

    # Not under pytest's basetemp: concurrent pytest runs prune each other's old basetemps.
    data = server_temp_dir("parrot-parents-pg-") / "data"
    server = get_server(data, cleanup_mode="delete")
    try:
        yield str(server.get_uri())
    finally:
        release(data)


@pytest.fixture(scope="session")
def embeddings() -> SentenceTransformerEmbeddings:
    """The real default model (all-MiniLM-L6-v2, bundled offline), loaded once."""
    emb = SentenceTransformerEmbeddings()
    emb.warm_up()
    return emb


def unique_table(prefix: str = "t") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


async def write_at_once(store: PgVectorStore, docs: Sequence[Any], vectors: Sequence[Any]) -> None:
    """Write ``docs`` (children with a ``document_id``) with their ``vectors`` in one
    transaction, each document's rows together: a fixture's many documents, where
    ``add_documents`` takes a transaction each."""
    grouped: dict[str, tuple[list[Any], list[Any]]] = {}
    for doc, vector in zip(docs, vectors, strict=True):
        rows, given = grouped.setdefault(str(doc.metadata["document_id"]), ([], []))
        rows.append(doc)
        given.append(vector)
    await store.replace_documents([(d, rows, given, None) for d, (rows, given) in grouped.items()])


def unit_vectors(n: int, seed: int, dim: int = 384) -> np.ndarray:
    """``n`` random unit vectors of ``dim`` floats (float32), reproducible by ``seed``."""
    vectors = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    normed: np.ndarray = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return normed


def child_metadata(i: int, **extra: Any) -> dict[str, Any]:
    """The metadata of child ``i`` of a fixture (document ``d<i>``, characters 0 to 10),
    with ``extra`` keys."""
    return {
        "document_id": f"d{i}",
        "is_chunk": True,
        "start_index": 0,
        "end_index": 10,
        **extra,
    }


def reopened(pg_dsn: str, embeddings: Any, table: str, **search_options: Any) -> PgVectorStore:
    """A store over the existing collection ``table`` (never created), searching with
    these ``HNSWQueryOptions``."""
    return PgVectorStore(
        dsn=pg_dsn,
        table=table,
        embedding=embeddings,
        create=False,
        search_options=HNSWQueryOptions(**search_options),
    )


@contextlib.contextmanager
def analysed_collection(
    pg_dsn: str,
    embeddings: Any,
    prefix: str,
    docs: Sequence[Any],
    vectors: Sequence[Any],
    **options: Any,
) -> Iterator[str]:
    """A module fixture's collection: ``docs`` written with their ``vectors`` through a
    store opened with ``options`` (``filter_keys``...), analysed; yields its table name
    and drops it after. Built and dropped on event loops of its own."""
    table = unique_table(prefix)

    async def build() -> None:
        async with PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings, **options) as store:
            await write_at_once(store, docs, vectors)
            async with store.engine.begin() as conn:
                await conn.exec_driver_sql(f"ANALYZE {store.qualified_name}")

    async def drop() -> None:
        async with PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings) as store:
            await store.drop()

    asyncio.run(build())
    try:
        yield table
    finally:
        asyncio.run(drop())


@contextlib.asynccontextmanager
async def fresh_store(
    pg_dsn: str, embeddings: SentenceTransformerEmbeddings, **kwargs: Any
) -> AsyncIterator[PgVectorStore]:
    """A connected store on a fresh table (``kwargs`` to :class:`PgVectorStore`), dropped
    after."""
    s = PgVectorStore(dsn=pg_dsn, table=unique_table(), embedding=embeddings, **kwargs)
    await s.connect()
    try:
        yield s
    finally:
        try:
            await s.drop()
        finally:
            await s.close()


@pytest.fixture
async def store(
    pg_dsn: str, embeddings: SentenceTransformerEmbeddings
) -> AsyncIterator[PgVectorStore]:
    """A connected store on a fresh table, dropped after the test."""
    async with fresh_store(pg_dsn, embeddings) as s:
        yield s


@dataclass(frozen=True)
class Ingested:
    """A collection ingested once for the session, and what the ingest command printed."""

    collection: str
    output: str


@pytest.fixture(scope="session")
def example_corpus(pg_dsn: str, embeddings: SentenceTransformerEmbeddings) -> Iterator[Ingested]:
    """The example corpus (``examples/corpus``) ingested once by ``parrot-parents ingest``
    with the defaults. Read only: a test that writes to a collection ingests its own."""
    from parrot_parents.cli.main import main

    table = unique_table("examples")
    common = ["--collection", table, "--dsn", pg_dsn]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["ingest", str(EXAMPLES), *common])
    assert code == 0, printed.getvalue()
    yield Ingested(table, printed.getvalue())
    with contextlib.redirect_stdout(io.StringIO()):
        main(["drop", table, "--yes", "--dsn", pg_dsn])


@pytest.fixture
async def example_store(
    pg_dsn: str, embeddings: SentenceTransformerEmbeddings, example_corpus: Ingested
) -> AsyncIterator[PgVectorStore]:
    """A connected store of its own on :func:`example_corpus` (closed after, never dropped)."""
    s = PgVectorStore(dsn=pg_dsn, table=example_corpus.collection, embedding=embeddings)
    await s.connect()
    try:
        yield s
    finally:
        await s.close()
