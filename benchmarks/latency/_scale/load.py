"""Build the scale benchmark's collections fast, in the product's own table and LangChain's.

* **Ours**: ``PgVectorStore(...).connect()`` creates the table, its indexes and the
  lexical (BM25) statistics triggers, so everything is the product's. Then every
  secondary index (HNSW, GIN, btrees) is dropped, its definition read from ``pg_indexes``
  first; the rows are loaded by binary COPY (asyncpg ``copy_records_to_table``, vectors
  through pgvector's asyncpg codec), one COPY per block of 2,000 documents; and the
  indexes are created again from the very same definitions, each timed. The BM25
  statistics triggers stay on: they are statement-level AFTER INSERT triggers with
  transition tables, which COPY fires once per COPY, so the statistics are exact (checked
  against a recount after the load).
* **LangChain**: ``PGEngine.ainit_vectorstore_table`` creates langchain-postgres's table;
  the children are COPYed into it (its ``aadd_embeddings`` writes one INSERT per row, too
  slow for 1M rows), each with ``doc_id`` = its parent's id in its metadata as
  ``ParentDocumentRetriever`` writes it; then ``aapply_vector_index(HNSWIndex())``, its
  own HNSW index (same m=16, ef_construction=64, cosine). The parents go to the docstore at
  query time (``_scale/langchain.py``).

A built table carries a comment naming the generator and size; a table with that comment
and the expected number of children is reused (``--rebuild`` forces a new one).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from pgvector.asyncpg import register_vector

from benchmarks.latency._scale.data import DIM, GENERATOR, SyntheticCollection, dumps

__all__ = [
    "BuildReport",
    "build_langchain",
    "build_ours",
    "connect_raw",
    "maintenance_mem",
    "size_label",
    "unnice_server",
]

LC_NAMESPACE = uuid.UUID("6f0b5f9e-4c1c-4a57-9a51-5c0a1e2f3b11")


def size_label(n: int) -> str:
    """``10k``, ``100k``, ``1m``: used in table names and report markers."""
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


@dataclass
class BuildReport:
    """What building (or reusing) one table took."""

    table: str
    reused: bool
    rows: int = 0
    copy_s: float = 0.0
    index_s: dict[str, float] = field(default_factory=dict)
    total_s: float = 0.0
    maintenance_work_mem: str = ""
    checks: list[str] = field(default_factory=list)


async def connect_raw(dsn: str) -> asyncpg.Connection:
    """A plain asyncpg connection with pgvector's binary codec."""
    conn = await asyncpg.connect(_plain_dsn(dsn))
    await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    await register_vector(conn)
    return conn


async def pooled_raw(dsn: str, ef_search: int, iterative_scan: str) -> asyncpg.Pool:
    """An ``asyncpg.Pool`` of two connections with pgvector's codec and the HNSW settings
    set once per connection, and no reset on release (asyncpg's default reset is one
    more round trip, and would undo the settings)."""

    async def init(conn: asyncpg.Connection) -> None:
        await register_vector(conn)
        await conn.execute(f"SET hnsw.ef_search = {int(ef_search)}")
        await conn.execute("SELECT set_config('hnsw.iterative_scan', $1, false)", iterative_scan)

    async def keep(conn: asyncpg.Connection) -> None:
        return None

    return await asyncpg.create_pool(_plain_dsn(dsn), min_size=2, max_size=2, init=init, reset=keep)


def _plain_dsn(dsn: str) -> str:
    return dsn.replace("postgresql+asyncpg://", "postgresql://", 1)


def _tag(n: int, kind: str) -> str:
    return f"{GENERATOR} {kind} children={n}"


async def _reusable(conn: asyncpg.Connection, table: str, tag: str, count_sql: str, n: int) -> bool:
    exists = await conn.fetchval("SELECT to_regclass($1) IS NOT NULL", f"public.{table}")
    if not exists:
        return False
    comment = await conn.fetchval("SELECT obj_description(to_regclass($1), 'pg_class')", table)
    if comment != tag:
        return False
    return int(await conn.fetchval(count_sql)) == n


async def _maybe_renice(conn: asyncpg.Connection) -> None:
    """A niced benchmark (the 1M build) makes its server backend as nice as itself."""
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    if mine <= 0:
        return
    pid = await conn.fetchval("SELECT pg_backend_pid()")
    try:
        os.setpriority(os.PRIO_PROCESS, int(pid), mine)
    except OSError:  # another user's server: leave it
        return
    # Parallel workers would be new processes at normal priority.
    await conn.execute("SET max_parallel_maintenance_workers = 0")


async def unnice_server(dsn: str) -> str:
    """Give the server (postmaster, so every new backend) this process's priority.

    The embedded server runs at the priority of the process that started it: a niced
    1M build would otherwise leave every later measurement's backends at nice 19.
    Returns what was done, for the log.
    """
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    conn = await asyncpg.connect(_plain_dsn(dsn))
    try:
        backend = int(await conn.fetchval("SELECT pg_backend_pid()"))
        # The backend's parent is the postmaster (read while the backend lives).
        with open(f"/proc/{backend}/stat", encoding="ascii") as f:
            postmaster = int(f.read().rsplit(")", 1)[1].split()[1])
        if os.getpriority(os.PRIO_PROCESS, postmaster) == mine:
            return f"server at nice {mine}"
        os.setpriority(os.PRIO_PROCESS, postmaster, mine)
    except (OSError, ValueError, IndexError) as exc:  # not Linux, or not our server
        return f"server priority left as it is ({exc})"
    finally:
        await conn.close()
    return f"server reniced to {mine} (pid {postmaster})"


def maintenance_mem(n_vectors: int) -> str:
    """Enough for pgvector to build the HNSW graph in memory (~2.3 KB a 384-d vector)."""
    mb = int(n_vectors * 2300 * 1.25 / 2**20)
    return f"{min(4096, max(64, mb))}MB"


async def _create_indexes(
    conn: asyncpg.Connection, defs: list[tuple[str, str]], report: BuildReport, n: int
) -> None:
    report.maintenance_work_mem = maintenance_mem(n)
    await conn.execute(f"SET maintenance_work_mem = '{report.maintenance_work_mem}'")
    for name, definition in defs:
        t = time.perf_counter()
        await conn.execute(definition)
        report.index_s[name] = round(time.perf_counter() - t, 2)
        print(f"  {name}: {report.index_s[name]} s", flush=True)  # a long build's progress


async def build_ours(
    dsn: str,
    store_factory: Any,
    coll: SyntheticCollection,
    table: str,
    rebuild: bool,
    lexical_backend: str | None = None,
) -> BuildReport:
    """The product's collection of ``coll``, in ``table``; reused when already built.
    ``lexical_backend``: the one a new table is created with (its index, like the others,
    built after the COPY); None for the product's default."""
    started = time.perf_counter()
    tag = _tag(coll.n_children, "ours")
    conn = await connect_raw(dsn)
    try:
        await _maybe_renice(conn)
        count_sql = f"SELECT count(*) FROM {table} WHERE embedding IS NOT NULL"
        if not rebuild and await _reusable(conn, table, tag, count_sql, coll.n_children):
            return BuildReport(table, reused=True, rows=coll.n_children)
        # A fresh table: drop() also drops the BM25 statistics, which must start at zero.
        store = store_factory(table)
        await store.connect()
        await store.drop()
        await store.close()
        store = store_factory(
            table, **({"lexical_backend": lexical_backend} if lexical_backend else {})
        )
        await store.connect()  # the product's table, indexes, lexical column and triggers
        await store.close()
        defs = [
            (r["indexname"], r["indexdef"])
            for r in await conn.fetch(
                "SELECT i.indexname, i.indexdef FROM pg_indexes i"
                " JOIN pg_class c ON c.relname = i.indexname"
                " JOIN pg_index x ON x.indexrelid = c.oid"
                " WHERE i.schemaname = 'public' AND i.tablename = $1 AND NOT x.indisprimary"
                " ORDER BY i.indexname",
                table,
            )
        ]
        if not any("hnsw" in d for _, d in defs):
            raise SystemExit(f"no HNSW index on {table}: {defs}")
        for name, _ in defs:
            await conn.execute(f'DROP INDEX "public"."{name}"')
        report = BuildReport(table, reused=False)
        t = time.perf_counter()
        for block in coll.blocks():
            records: list[tuple[Any, ...]] = [
                (pid, None, text, dumps(meta))
                for pid, text, meta in zip(
                    block.parent_ids, block.parent_texts, block.parent_meta, strict=True
                )
            ]
            records += [
                (cid, vec, text, dumps(meta))
                for cid, vec, text, meta in zip(
                    block.child_ids,
                    block.child_vectors,
                    block.child_texts,
                    block.child_meta,
                    strict=True,
                )
            ]
            await conn.copy_records_to_table(
                table,
                records=records,
                columns=["id", "embedding", "document", "cmetadata"],
                schema_name="public",
            )
            report.rows += len(records)
        report.copy_s = round(time.perf_counter() - t, 2)
        print(f"  {table}: COPY of {report.rows} rows {report.copy_s} s", flush=True)
        # HNSW last: it is the long one, and the others are then already there.
        defs.sort(key=lambda d: "hnsw" in d[1])
        await _create_indexes(conn, defs, report, coll.n_children)
        await conn.execute(f"ANALYZE {table}")
        report.checks.append(await _check_lexical(conn, table))
        await conn.execute(f"COMMENT ON TABLE {table} IS '{tag}'")
        report.total_s = round(time.perf_counter() - started, 2)
        return report
    finally:
        await conn.close()


async def _check_lexical(conn: asyncpg.Connection, table: str) -> str:
    """The BM25 statistics the triggers kept during COPY, against a recount."""
    base = table[:40]
    kept = await conn.fetchrow(f"SELECT n, total_len FROM {base}_lexstats")
    counted = await conn.fetchrow(
        f"SELECT count(*) AS n, coalesce(sum(length(lexical)), 0) AS total_len FROM {table}"
        " WHERE lexical IS NOT NULL"
    )
    lexemes = await conn.fetchval(
        f"SELECT count(*) FROM (SELECT u.lexeme, count(*) AS df FROM {table} r,"
        " unnest(r.lexical) u WHERE r.lexical IS NOT NULL GROUP BY u.lexeme) c"
        f" FULL JOIN {base}_lexicon l USING (lexeme) WHERE c.df IS DISTINCT FROM l.df"
    )
    if kept is None or tuple(kept) != tuple(counted) or lexemes:
        raise SystemExit(
            f"BM25 statistics of {table} are wrong after COPY: kept {kept}, counted "
            f"{counted}, {lexemes} lexemes with another df"
        )
    return f"BM25 statistics exact after COPY (n={counted['n']}, total_len={counted['total_len']})"


async def build_langchain(
    dsn: str, coll: SyntheticCollection, table: str, rebuild: bool
) -> BuildReport:
    """langchain-postgres's PGVectorStore table of the same children; reused when built."""
    from langchain_postgres import PGEngine
    from sqlalchemy.ext.asyncio import create_async_engine

    started = time.perf_counter()
    tag = _tag(coll.n_children, "langchain")
    conn = await connect_raw(dsn)
    engine = create_async_engine(_async_dsn(dsn))
    try:
        await _maybe_renice(conn)
        count_sql = f"SELECT count(*) FROM {table}"
        if not rebuild and await _reusable(conn, table, tag, count_sql, coll.n_children):
            return BuildReport(table, reused=True, rows=coll.n_children)
        pg = PGEngine.from_engine(engine)
        await pg.ainit_vectorstore_table(table, DIM, overwrite_existing=True)
        report = BuildReport(table, reused=False)
        t = time.perf_counter()
        for block in coll.blocks():
            records = [
                (
                    uuid.uuid5(LC_NAMESPACE, cid),
                    text,
                    vec,
                    dumps({**meta, "doc_id": meta["parent_document_id"]}),
                )
                for cid, vec, text, meta in zip(
                    block.child_ids,
                    block.child_vectors,
                    block.child_texts,
                    block.child_meta,
                    strict=True,
                )
            ]
            await conn.copy_records_to_table(
                table,
                records=records,
                columns=["langchain_id", "content", "embedding", "langchain_metadata"],
                schema_name="public",
            )
            report.rows += len(records)
        report.copy_s = round(time.perf_counter() - t, 2)
        print(f"  {table}: COPY of {report.rows} rows {report.copy_s} s", flush=True)
        report.maintenance_work_mem = maintenance_mem(coll.n_children)
        t = time.perf_counter()
        await _lc_index(dsn, table, report.maintenance_work_mem)
        report.index_s["langchain HNSWIndex()"] = round(time.perf_counter() - t, 2)
        await conn.execute(f"ANALYZE {table}")
        await conn.execute(f"COMMENT ON TABLE {table} IS '{tag}'")
        report.total_s = round(time.perf_counter() - started, 2)
        return report
    finally:
        await conn.close()
        await engine.dispose()


async def _lc_index(dsn: str, table: str, mem: str) -> None:
    """``aapply_vector_index(HNSWIndex())`` on an engine whose sessions start with
    ``maintenance_work_mem`` (and, when niced, the same niceness as ours)."""
    from langchain_postgres import PGEngine, PGVectorStore
    from langchain_postgres.v2.indexes import HNSWIndex
    from sqlalchemy import event
    from sqlalchemy.ext.asyncio import create_async_engine

    niceness = os.getpriority(os.PRIO_PROCESS, 0)
    settings = {"maintenance_work_mem": mem}
    if niceness > 0:  # as _maybe_renice: no parallel workers at normal priority
        settings["max_parallel_maintenance_workers"] = "0"
    # Session defaults sent at connection start: no transaction of langchain-postgres's
    # can roll them back (a SET in a pool event could be).
    engine = create_async_engine(_async_dsn(dsn), connect_args={"server_settings": settings})

    def _renice(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        cursor.execute("SELECT pg_backend_pid()")
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, int(cursor.fetchone()[0]), niceness)
        cursor.close()

    if niceness > 0:
        event.listen(engine.sync_engine, "connect", _renice)
    try:
        vs = await PGVectorStore.create(
            PGEngine.from_engine(engine), table_name=table, embedding_service=_NoEmbedding()
        )
        await vs.aapply_vector_index(HNSWIndex())
    finally:
        await engine.dispose()


class _NoEmbedding:
    """Building the index embeds nothing."""

    def embed_query(self, text: str) -> list[float]:
        raise RuntimeError("no embedding while building")

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("no embedding while building")


def _async_dsn(dsn: str) -> str:
    if dsn.startswith("postgresql://"):
        return "postgresql+asyncpg://" + dsn[len("postgresql://") :]
    return dsn
