"""Marker backfill on a real collection: batches, resumption, and live queries meanwhile."""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import pytest
from sqlalchemy import text

from parrot_parents.cli.main import main
from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.backfill import BackfillReport, backfill_markers
from parrot_parents.stores.records.markers import CHILD_PREDICATE

DIM = 384


def _vector(rng: random.Random) -> str:
    return "[" + ",".join(f"{rng.uniform(-1, 1):.4f}" for _ in range(DIM)) + "]"


async def _legacy_rows(store: PgVectorStore, n: int, seed: int = 0) -> None:
    """``n`` rows as older tooling wrote them: every 10th a parent (string boolean, embedded),
    the others children without ``is_chunk``."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        if i % 10 == 0:
            meta: dict[str, Any] = {"document_id": f"d{i // 10}", "is_full_document": "True"}
        else:
            meta = {"document_id": f"d{i // 10}", "parent_document_id": f"p{i // 10:05d}"}
        rows.append({"id": f"r{i:05d}", "e": _vector(rng), "d": f"text {i}", "m": json.dumps(meta)})
    async with store.engine.begin() as conn:
        await conn.execute(
            text(
                f"INSERT INTO {store.qualified_name} (id, embedding, document, cmetadata)"
                " VALUES (:id, CAST(:e AS vector), :d, CAST(:m AS jsonb))"
            ),
            rows,
        )


async def _markers(store: PgVectorStore) -> dict[str, Any]:
    async with store.engine.connect() as conn:
        rows = await conn.execute(text(f"SELECT id, cmetadata FROM {store.qualified_name}"))
        return {r.id: r.cmetadata for r in rows}


async def test_backfill_adds_markers_as_a_reingest_would(store: PgVectorStore) -> None:
    await _legacy_rows(store, 250)
    report = await backfill_markers(store.table, engine=store.engine, batch_size=100)
    assert report.finished
    assert (report.scanned, report.updated, report.batches) == (250, 250, 3)
    markers = await _markers(store)
    assert markers["r00000"]["is_full_document"] is True  # "True" coerced to a boolean
    assert markers["r00000"]["is_chunk"] is False
    assert markers["r00001"]["is_chunk"] is True
    assert markers["r00001"]["parent_document_id"] == "p00000"
    # Parents stay excluded from search; every child is still found.
    assert await store.count(include_parents=False) == 225


async def test_a_second_pass_changes_nothing(store: PgVectorStore) -> None:
    await _legacy_rows(store, 30)
    await backfill_markers(store.table, engine=store.engine, batch_size=7)
    before = await _markers(store)
    again = await backfill_markers(store.table, engine=store.engine, batch_size=7)
    assert again.finished and again.updated == 0 and again.resumed_from is None
    assert await _markers(store) == before


async def test_max_batches_stops_and_the_next_run_resumes(store: PgVectorStore) -> None:
    await _legacy_rows(store, 100)
    first = await backfill_markers(store.table, engine=store.engine, batch_size=30, max_batches=2)
    assert not first.finished
    assert (first.scanned, first.batches, first.last_id) == (60, 2, "r00059")
    markers = await _markers(store)
    assert "is_chunk" in markers["r00059"] and "is_chunk" not in markers["r00060"]
    second = await backfill_markers(store.table, engine=store.engine, batch_size=30)
    assert second.finished
    assert second.resumed_from == "r00059"
    # Totals cover the whole pass: nothing scanned twice.
    assert (second.scanned, second.updated, second.batches) == (100, 100, 4)


async def test_restart_ignores_an_unfinished_pass(store: PgVectorStore) -> None:
    await _legacy_rows(store, 40)
    await backfill_markers(store.table, engine=store.engine, batch_size=10, max_batches=1)
    report = await backfill_markers(store.table, engine=store.engine, batch_size=10, restart=True)
    assert report.resumed_from is None
    assert (report.scanned, report.updated) == (40, 30)  # the first 10 were already done


async def test_a_cancelled_run_keeps_its_committed_batches(store: PgVectorStore) -> None:
    await _legacy_rows(store, 200)
    seen: list[BackfillReport] = []
    three = asyncio.Event()

    def on_batch(report: BackfillReport) -> None:
        seen.append(report)
        if len(seen) == 3:
            three.set()

    task = asyncio.create_task(
        backfill_markers(
            store.table, engine=store.engine, batch_size=20, pause_s=0.05, on_batch=on_batch
        )
    )
    await three.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    done = seen[-1]
    assert not done.finished
    resumed = await backfill_markers(store.table, engine=store.engine, batch_size=20)
    assert resumed.resumed_from == done.last_id
    assert resumed.finished
    assert (resumed.scanned, resumed.updated, resumed.batches) == (200, 200, 10)


async def test_queries_keep_working_while_the_backfill_runs(
    store: PgVectorStore, pg_dsn: str, embeddings: Any
) -> None:
    # Each row written or updated is also an HNSW insert (~3 ms here): 1,000 rows in
    # batches of 50 make the same 20 batches as 2,000 in batches of 100, at half the cost.
    await _legacy_rows(store, 1000)
    rng = random.Random(1)
    query = [rng.uniform(-1, 1) for _ in range(DIM)]
    stop = asyncio.Event()
    latencies: list[float] = []
    lock_modes: set[str] = set()

    # Each concurrent client has its own store, as separate processes would.
    def client() -> PgVectorStore:
        return PgVectorStore(dsn=pg_dsn, table=store.table, embedding=embeddings)

    async def search() -> None:
        async with client() as s:
            while not stop.is_set():
                t = time.perf_counter()
                results = await s.similarity_search_by_vector(query, limit=5)
                latencies.append(time.perf_counter() - t)
                assert len(results) == 5
                assert all(not r.id.endswith("0") for r in results)  # never a parent

    async def watch_locks() -> None:
        async with store.engine.connect() as conn:
            while not stop.is_set():
                rows = await conn.execute(
                    # locktype 'relation' only: 'extend' locks (adding pages) are not table locks.
                    text(
                        "SELECT mode FROM pg_locks WHERE locktype = 'relation'"
                        " AND relation = CAST(:t AS regclass)"
                    ),
                    {"t": store.qualified_name},
                )
                lock_modes.update(r.mode for r in rows)
                await conn.commit()
                await asyncio.sleep(0.002)

    async def write() -> None:
        from langchain_core.documents import Document

        async with client() as s:
            doc = Document(
                page_content="written during the backfill", metadata={"document_id": "w"}
            )
            await s.add_documents([doc])

    searchers = [asyncio.create_task(search()) for _ in range(2)]
    watcher = asyncio.create_task(watch_locks())
    while not latencies:  # the searchers are connected and running
        await asyncio.sleep(0.01)
    before = len(latencies)
    report, _ = await asyncio.gather(
        backfill_markers(store.table, dsn=pg_dsn, batch_size=50, pause_s=0.01),
        write(),
    )
    during = len(latencies) - before
    stop.set()
    await asyncio.gather(*searchers, watcher)

    assert report.finished and report.scanned >= 1000 and report.batches >= 20
    assert during >= 10, f"only {during} searches during {report.seconds}s of backfill"
    assert max(latencies) < 2.0
    # Only row-level work: no lock that would block readers or writers of the table.
    # (ShareUpdateExclusiveLock is autovacuum/autoanalyze reacting to the updates; it
    # conflicts with neither reads nor row writes.)
    assert lock_modes <= {"AccessShareLock", "RowExclusiveLock", "ShareUpdateExclusiveLock"}, (
        lock_modes
    )
    async with store.engine.connect() as conn:
        unmarked = await conn.execute(
            text(f"SELECT count(*) FROM {store.qualified_name} WHERE NOT (cmetadata ? 'is_chunk')")
        )
        assert unmarked.scalar() == 0
        children = await conn.execute(
            text(f"SELECT count(*) FROM {store.qualified_name} WHERE {CHILD_PREDICATE}")
        )
        assert children.scalar() == 901


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"batch_size": 0}, "batch_size must be an int >= 1, got 0"),
        ({"max_batches": 0}, "max_batches must be an int >= 1, got 0"),
        ({"pause_s": -1}, "pause_s must be >= 0"),
        ({"schema": "bad schema"}, "invalid schema name"),
    ],
)
async def test_bad_parameters_are_refused(
    store: PgVectorStore, kwargs: dict[str, Any], match: str
) -> None:
    with pytest.raises(ConfigurationError, match=match):
        await backfill_markers(store.table, engine=store.engine, **kwargs)


async def test_a_missing_collection_is_refused(store: PgVectorStore) -> None:
    with pytest.raises(ConfigurationError, match=r"collection public\.nope does not exist"):
        await backfill_markers("nope", engine=store.engine)


def test_backfill_command(pg_dsn: str, capsys: pytest.CaptureFixture[str], embeddings: Any) -> None:
    from tests.conftest import unique_table
    from tests.migrations.support import in_thread

    table = unique_table("bf")

    async def setup() -> None:
        async with PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings) as s:
            await _legacy_rows(s, 25)

    in_thread(asyncio.run, setup())
    args = ["backfill", "--dsn", pg_dsn, "--collection", table, "--batch-size", "10"]
    assert main([*args, "--max-batches", "1"]) == 0
    out = capsys.readouterr()
    assert "10 row(s) scanned, 10 updated" in out.out and "run again to resume" in out.out
    assert "batch 1: 10 row(s) scanned" in out.err
    assert main([*args, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "(resumed after 'r00009')" in out and "25 row(s) scanned" in out and "finished" in out
