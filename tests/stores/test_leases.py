"""Leases: pooled connections kept checked out for the store's prepared reads (issue 11)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import asyncpg
import numpy as np
import pytest
from langchain_core.documents import Document
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import NullPool

from parrot_parents.stores.engine import make_engine
from parrot_parents.stores.leases import Lease, Leases, leases_for
from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import unique_table

VECTORS = np.random.default_rng(0).standard_normal((12, 4)).astype(np.float32)


@pytest.fixture
async def small_pool(pg_dsn: str) -> AsyncIterator[PgVectorStore]:
    """A store on an engine with a pool of 4 connections (so 2 leases)."""
    store = PgVectorStore(
        dsn=pg_dsn, table=unique_table("lease"), dimension=4, engine_kwargs={"pool_size": 4}
    )
    docs = [Document(page_content=f"row {i}", metadata={"is_chunk": True}) for i in range(12)]
    await store.add_documents(docs, embeddings=list(VECTORS))
    try:
        yield store
    finally:
        await store.drop()
        await store.close()


@pytest.fixture
async def one_lease(pg_dsn: str) -> AsyncIterator[Leases]:
    """One lease over an engine of its own (pool of 2)."""
    engine = await make_engine(pg_dsn, pool_size=2)
    leases = Leases(engine.sync_engine, 1)
    try:
        yield leases
    finally:
        await leases.release_idle()
        await engine.dispose()


async def _leases_of(store: PgVectorStore) -> Leases:
    engine, _ = await store.ready()
    leases = leases_for(engine)
    assert leases is not None
    return leases


async def _pid(lease: Lease) -> int:
    return int(await lease.driver.fetchval("SELECT pg_backend_pid()"))


def _pid_after(gate: asyncio.Event) -> Callable[[Lease], Awaitable[int]]:
    """Work that holds its lease until ``gate`` opens, then returns the backend's pid."""

    async def hold(lease: Lease) -> int:
        await gate.wait()
        return await _pid(lease)

    return hold


async def test_sequential_searches_run_on_one_kept_connection(small_pool: PgVectorStore) -> None:
    leases = await _leases_of(small_pool)
    assert leases.size == 2
    for v in VECTORS:
        assert len(await small_pool.similarity_search_by_vector(v, limit=3)) == 3
    # One lease served all of them, and it stays checked out between reads.
    assert (leases.checked_out, leases.idle) == (1, 1)
    pids = {await leases.run(_pid) for _ in range(5)}
    assert len(pids) == 1


async def test_a_burst_never_takes_more_than_half_the_pool(small_pool: PgVectorStore) -> None:
    leases = await _leases_of(small_pool)
    peak = 0

    async def search(v: np.ndarray) -> int:
        nonlocal peak
        found = await small_pool.similarity_search_by_vector(v, limit=3)
        peak = max(peak, leases.checked_out)
        return len(found)

    # Writes keep the rest of the pool while reads queue for their two leases.
    docs = [Document(page_content="late", metadata={"is_chunk": True})]
    counts, _ = await asyncio.gather(
        asyncio.gather(*(search(v) for v in np.tile(VECTORS, (4, 1)))),
        small_pool.add_documents(docs, embeddings=[VECTORS[0]]),
    )
    assert counts == [3] * 48
    assert peak == 2
    assert small_pool.engine.sync_engine.pool.checkedout() == 2  # the two leases, no more


async def test_a_server_error_keeps_the_connection(small_pool: PgVectorStore) -> None:
    leases = await _leases_of(small_pool)
    before = await leases.run(_pid)

    async def divide(lease: Lease) -> object:
        return await lease.driver.fetchval("SELECT 1 / 0")

    with pytest.raises(asyncpg.DivisionByZeroError):
        await leases.run(divide)
    assert await leases.run(_pid) == before


async def test_a_cancelled_read_does_not_hand_on_its_connection(
    small_pool: PgVectorStore,
) -> None:
    leases = await _leases_of(small_pool)
    before = await leases.run(_pid)

    async def sleep(lease: Lease) -> object:
        return await lease.driver.fetchval("SELECT pg_sleep(30)")

    task = asyncio.create_task(leases.run(sleep))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The connection was mid-statement: invalidated, not reused.
    assert await leases.run(_pid) != before
    assert leases.checked_out == 1
    assert len(await small_pool.similarity_search_by_vector(VECTORS[0], limit=3)) == 3


async def test_a_waiter_gets_the_slot_of_a_failed_lease(one_lease: Leases) -> None:
    leases = one_lease
    gate = asyncio.Event()

    async def hold_then_fail(lease: Lease) -> None:
        await gate.wait()
        raise RuntimeError("not a server error: the connection is in doubt")

    first = asyncio.create_task(leases.run(hold_then_fail))
    await asyncio.sleep(0.1)
    second = asyncio.create_task(leases.run(_pid))  # waits: the one slot is taken
    third = asyncio.create_task(leases.run(_pid))
    await asyncio.sleep(0.1)
    assert not second.done()
    gate.set()
    with pytest.raises(RuntimeError):
        await first
    # The failed lease was invalidated; its slot went to the waiters, in turn.
    assert await second == await third
    assert leases.checked_out == 1


async def test_a_cancelled_waiter_leaves_the_queue(one_lease: Leases) -> None:
    leases = one_lease
    gate = asyncio.Event()
    first = asyncio.create_task(leases.run(_pid_after(gate)))
    await asyncio.sleep(0.1)
    waiter = asyncio.create_task(leases.run(_pid))
    await asyncio.sleep(0.1)
    waiter.cancel()
    gate.set()
    pid = await first
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert await leases.run(_pid) == pid
    assert (leases.checked_out, leases.idle) == (1, 1)


@asynccontextmanager
async def _one_row_on(engine: AsyncEngine, prefix: str) -> AsyncIterator[PgVectorStore]:
    """A store of one row on ``engine`` (the caller's); dropped, closed and the engine
    disposed afterwards."""
    store = PgVectorStore(table=unique_table(prefix), dimension=4, engine=engine)
    try:
        await store.add_documents(
            [Document(page_content="row", metadata={"is_chunk": True})], embeddings=[VECTORS[0]]
        )
        yield store
    finally:
        await store.drop()
        await store.close()
        await engine.dispose()


@pytest.mark.parametrize(
    "engine_kwargs",
    [{"poolclass": NullPool}, {"pool_pre_ping": True}],
    ids=["null_pool", "pre_ping"],
)
async def test_an_engine_that_wants_its_checkouts_reads_through_sqlalchemy(
    pg_dsn: str, engine_kwargs: dict[str, object]
) -> None:
    """No sized pool to share, or a ping asked for at every checkout: no leases."""
    engine = await make_engine(pg_dsn, **engine_kwargs)
    async with _one_row_on(engine, "nolease") as store:
        assert leases_for(engine) is None
        assert len(await store.similarity_search_by_vector(VECTORS[0], limit=1)) == 1


async def test_close_checks_the_leases_back_in_on_a_shared_engine(pg_dsn: str) -> None:
    engine = await make_engine(pg_dsn)
    async with _one_row_on(engine, "shared") as store:
        await store.similarity_search_by_vector(VECTORS[0], limit=1)
        assert engine.sync_engine.pool.checkedout() == 1
        await store.close()
        assert engine.sync_engine.pool.checkedout() == 0
        # The engine is the caller's: it still serves, and a reopened store leases again.
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT 1"))).scalar() == 1
        await store.connect()
        assert len(await store.similarity_search_by_vector(VECTORS[0], limit=1)) == 1


async def test_a_lease_of_a_disposed_pool_is_not_handed_on(small_pool: PgVectorStore) -> None:
    leases = await _leases_of(small_pool)
    before = await leases.run(_pid)
    await small_pool.engine.dispose()  # a new pool: the kept lease belongs to the old one
    assert await leases.run(_pid) != before
    assert leases.checked_out == 1


async def test_an_engine_closed_and_dropped_is_collected(pg_dsn: str) -> None:
    """The table of leases is keyed by engine: a lease set holding its engine strongly
    kept every store's engine alive after ``close()``."""
    import gc
    import weakref

    store = PgVectorStore(dsn=pg_dsn, table=unique_table("gc"), dimension=4)
    await store.add_documents(
        [Document(page_content="row", metadata={"is_chunk": True})], embeddings=[VECTORS[0]]
    )
    await store.similarity_search_by_vector(VECTORS[0], limit=1)
    engine, _ = await store.ready()
    gone = weakref.ref(engine.sync_engine)
    await store.drop()
    await store.close()
    del engine
    gc.collect()
    assert gone() is None


async def test_a_waiter_cancelled_as_the_lease_comes_back_raises_cancelled(
    one_lease: Leases,
) -> None:
    """The release skipped the cancelled waiter (popped it from the queue), and the
    waiter then failed to remove itself: ``ValueError`` instead of the cancellation."""
    leases = one_lease
    gate = asyncio.Event()

    async def hold(lease: Lease) -> int:
        pid = await _pid(lease)
        await gate.wait()
        return pid  # released at once: before the waiter's task runs again

    first = asyncio.create_task(leases.run(hold))
    await asyncio.sleep(0.1)
    waiter = asyncio.create_task(leases.run(_pid))
    await asyncio.sleep(0.1)
    gate.set()  # the lease comes back first...
    waiter.cancel()  # ...to a waiter already cancelled
    pid = await first
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert await leases.run(_pid) == pid
    assert (leases.checked_out, leases.idle) == (1, 1)


async def test_a_cancelled_close_still_disposes_of_the_pool(small_pool: PgVectorStore) -> None:
    await asyncio.gather(*(small_pool.similarity_search_by_vector(v, limit=3) for v in VECTORS[:6]))
    pool_of = small_pool.engine.sync_engine
    closing = asyncio.create_task(small_pool.close())
    await asyncio.sleep(0)
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    await asyncio.sleep(0.5)  # the shielded release and dispose go on
    assert (pool_of.pool.checkedin(), pool_of.pool.checkedout()) == (0, 0)


async def test_disposing_a_shared_engine_closes_its_leased_connections(pg_dsn: str) -> None:
    engine = await make_engine(pg_dsn)
    async with _one_row_on(engine, "dispose") as store:
        await asyncio.gather(*(store.similarity_search_by_vector(v, limit=1) for v in VECTORS))
        leases = leases_for(engine)
        assert leases is not None and leases.idle >= 1
        drivers = [lease.driver for lease in leases._idle]
        await engine.dispose()
        assert (leases.checked_out, leases.idle) == (0, 0)
        assert all(driver.is_closed() for driver in drivers)
        assert len(await store.similarity_search_by_vector(VECTORS[0], limit=1)) == 1


async def test_pool_recycle_applies_to_kept_leases(pg_dsn: str) -> None:
    engine = await make_engine(pg_dsn, pool_recycle=1)
    async with _one_row_on(engine, "recycle") as store:
        await store.similarity_search_by_vector(VECTORS[0], limit=1)
        leases = leases_for(engine)
        assert leases is not None
        before = await leases.run(_pid)
        await asyncio.sleep(1.2)
        assert await leases.run(_pid) != before
        assert leases.checked_out == 1


async def _session(engine: AsyncEngine) -> dict[str, str]:
    """The settings a search changes, as the next checkout of ``engine`` sees them."""
    async with engine.connect() as conn:
        rows = await conn.execute(
            text(
                "SELECT name, setting FROM pg_settings WHERE name IN"
                " ('enable_seqscan', 'hnsw.iterative_scan', 'hnsw.ef_search')"
            )
        )
        return {name: setting for name, setting in rows}


@pytest.mark.parametrize(
    "engine_kwargs",
    [{"pool_size": 2}, {"pool_size": 1, "pool_pre_ping": True}],
    ids=["leased", "through_sqlalchemy"],
)
async def test_a_shared_engine_gets_its_sessions_back_unchanged(
    pg_dsn: str, engine_kwargs: dict[str, object]
) -> None:
    """The caller's own statements on a shared engine are planned as before: no
    ``enable_seqscan = off`` left behind by a search (on a lease, from the store's close;
    through SQLAlchemy, from each search)."""
    engine = await make_engine(pg_dsn, max_overflow=0, **engine_kwargs)
    before = await _session(engine)
    async with _one_row_on(engine, "restore") as store:
        await store.similarity_search_by_vector(VECTORS[0], limit=1)
        if leases_for(engine) is not None:
            await store.close()
        # One connection in the pool (a lease is back): it is the one the search used.
        assert engine.sync_engine.pool.checkedout() == 0
        after = await _session(engine)
        assert after["enable_seqscan"] == before["enable_seqscan"] == "on"
        # pgvector's defaults (its settings exist once the search loaded it).
        assert after["hnsw.iterative_scan"] == "off"
        assert after["hnsw.ef_search"] == "40"
        # And the store's next search sets what it needs again.
        assert len(await store.similarity_search_by_vector(VECTORS[0], limit=1)) == 1


async def test_the_stores_own_engine_keeps_its_settings(pg_dsn: str) -> None:
    """No other code runs on a store's own engine: its settings stay (no extra statement
    at check-in)."""
    store = PgVectorStore(
        dsn=pg_dsn,
        table=unique_table("own"),
        dimension=4,
        engine_kwargs={"pool_size": 1, "pool_pre_ping": True},
    )
    try:
        await store.add_documents(
            [Document(page_content="row", metadata={"is_chunk": True})], embeddings=[VECTORS[0]]
        )
        await store.similarity_search_by_vector(VECTORS[0], limit=1)
        engine, _ = await store.ready()
        assert (await _session(engine))["enable_seqscan"] == "off"
    finally:
        await store.drop()
        await store.close()


async def test_a_search_cancelled_after_its_settings_leaves_nothing_behind(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cancelled once the server applied the settings but before the reply was read: the
    names were recorded first, so the connection still goes back restored."""
    real = asyncpg.connection.Connection.execute

    async def cancelled_after(self: asyncpg.Connection, query: str, *args: object) -> str:
        result: str = await real(self, query, *args)
        if query.startswith("SELECT set_config("):
            raise asyncio.CancelledError
        return result

    engine = await make_engine(pg_dsn, pool_size=1, max_overflow=0, pool_pre_ping=True)
    async with _one_row_on(engine, "cancelset") as store:
        monkeypatch.setattr(asyncpg.connection.Connection, "execute", cancelled_after)
        with pytest.raises(asyncio.CancelledError):
            await store.similarity_search_by_vector(VECTORS[0], limit=1)
        monkeypatch.undo()
        assert (await _session(engine))["enable_seqscan"] == "on"


async def test_a_filtered_search_gives_back_the_callers_start_up_settings(pg_dsn: str) -> None:
    """A shared engine's own start-up HNSW settings are what its sessions return with."""
    wanted = {"hnsw.ef_search": "77", "hnsw.iterative_scan": "relaxed_order"}
    engine = await make_engine(
        pg_dsn, pool_size=2, max_overflow=0, connect_args={"server_settings": wanted}
    )
    async with _one_row_on(engine, "startup") as store:
        found = await store.similarity_search_by_vector(VECTORS[0], limit=1, filter={"x": 1})
        assert found == []  # the row has no "x": the filter ran, through SQLAlchemy
        after = await _session(engine)
        assert {k: after[k] for k in wanted} == wanted


async def test_a_lease_in_use_when_the_store_closes_goes_back_to_the_pool(pg_dsn: str) -> None:
    engine = await make_engine(pg_dsn, pool_size=2, max_overflow=0)
    async with _one_row_on(engine, "closebusy") as store:
        await store.similarity_search_by_vector(VECTORS[0], limit=1)
        leases = await _leases_of(store)
        gate = asyncio.Event()
        busy = asyncio.create_task(leases.run(_pid_after(gate)))
        await asyncio.sleep(0.05)
        await store.close()
        gate.set()
        await busy
        assert engine.sync_engine.pool.checkedout() == 0
        assert (leases.checked_out, leases.idle) == (0, 0)


async def test_a_caller_holding_the_rest_of_a_shared_pool_does_not_starve_the_store(
    pg_dsn: str,
) -> None:
    """The leases hold half of a pool of 4; the caller holds the other half and awaits
    the store: its writes and filtered searches take a lease's connection back."""
    engine = await make_engine(pg_dsn, pool_size=4, max_overflow=0, pool_timeout=1)
    async with _one_row_on(engine, "starve") as store:
        await asyncio.gather(*(store.similarity_search_by_vector(v, limit=1) for v in VECTORS[:4]))
        assert (await _leases_of(store)).checked_out == 2
        held = [await engine.connect() for _ in range(2)]
        try:
            found = await store.similarity_search_by_vector(VECTORS[0], limit=1, filter={"x": 1})
            assert found == []
            await store.add_documents(
                [Document(page_content="more", metadata={"is_chunk": True})],
                embeddings=[VECTORS[1]],
            )
            assert len(await store.similarity_search_by_vector(VECTORS[1], limit=2)) == 2
        finally:
            for conn in held:
                await conn.close()


async def test_a_dead_lease_is_not_checked_back_into_the_pool(pg_dsn: str) -> None:
    """Its server process gone (a restart, a timeout), a lease is dropped at close, not
    handed to the pool's next checkout."""
    engine = await make_engine(pg_dsn, pool_size=2, max_overflow=1)
    async with _one_row_on(engine, "deadlease") as store:
        await store.similarity_search_by_vector(VECTORS[0], limit=1)
        leases = await _leases_of(store)
        pid = await leases.run(_pid)
        async with engine.connect() as conn:
            await conn.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})
        lease = leases._idle[0]
        for _ in range(100):
            if lease.driver.is_closed():
                break
            await asyncio.sleep(0.02)
        assert lease.driver.is_closed()
        await store.close()
        async with engine.begin() as conn:  # the next checkout gets a live connection
            assert (await conn.execute(text("SELECT 1"))).scalar() == 1
