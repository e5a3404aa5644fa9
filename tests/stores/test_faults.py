"""Faults a store survives: concurrent writers of one document, and the database stopped
and restarted under a running loop of searches."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.documents import Document

from parrot_parents.errors import StoreError
from parrot_parents.loaders.hierarchy import LateChunkingProcessor
from parrot_parents.stores.postgres import PgVectorStore
from tests.conftest import server_temp_dir, unique_table
from tests.stores.wire import RoundTripProxy

RACE_RUNS = 20


def _version(store: PgVectorStore, text: str, size: int) -> list[Document]:
    proc = LateChunkingProcessor(child_chunk_size=size, embedding=store.embedding)
    return proc.build_hierarchy(text, "manual").documents()


def _vectors(docs: list[Document], dim: int) -> list[list[float] | None]:
    return [None if not d.metadata.get("is_chunk") else [1.0] + [0.0] * (dim - 1) for d in docs]


async def test_concurrent_replace_of_one_document_leaves_one_version(store: PgVectorStore) -> None:
    a = _version(store, "Version A. " * 40, 60)
    b = _version(store, "Version B is longer. " * 30, 100)
    dim = store.dimension
    for _ in range(RACE_RUNS):
        await asyncio.gather(
            store.replace_document("manual", a, embeddings=_vectors(a, dim)),
            store.replace_document("manual", b, embeddings=_vectors(b, dim)),
        )
        rows = await store.fetch_chunk_ranges([("manual", 0, 10_000)])
        texts = {r.content[:9] for r in rows["manual"]}
        assert len(texts) == 1, texts
        expected = len(a) if texts == {"Version A"} else len(b)
        assert await store.count() == expected
        parents = await store.count() - await store.count(include_parents=False)
        assert parents == 1


def _pg_ctl(server: Any, *args: str) -> None:
    """Run pg_ctl on the server's data directory as the user that owns it."""
    from pgserver._commands import pg_ctl

    pg_ctl(["-w", *args], pgdata=server.pgdata, user=server.system_user, timeout=60)


@pytest.fixture
def own_server():
    """A private embedded server, so stopping it disturbs no other test."""
    from parrot_parents.embedded.server import get_server, release

    data = server_temp_dir("parrot-parents-fault-") / "data"
    try:
        server = get_server(data, cleanup_mode="delete")
    except StoreError:
        # Starting a server is the fixture, not the test: one retry in a fresh directory
        # (pg_ctl can be killed by a signal on a shared machine; see conftest).
        data = server_temp_dir("parrot-parents-fault-") / "data"
        server = get_server(data, cleanup_mode="delete")
    try:
        yield server, data
    finally:
        try:
            server.ensure_postgres_running()
        finally:
            release(data)


async def test_stop_and_restart_under_a_loop_of_searches(own_server, embeddings) -> None:
    server, _ = own_server
    store = PgVectorStore(dsn=server.get_uri(), table=unique_table("fault"), embedding=embeddings)
    await store.add_documents(
        [Document(page_content=f"pump maintenance step {i}") for i in range(20)]
    )
    query = await embeddings.aembed_query("pump maintenance")
    outcomes: list[tuple[float, float, str]] = []  # (started, ended, "ok" | error class)
    stop = asyncio.Event()

    async def searcher() -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                hits = await store.similarity_search_by_vector(query, limit=3)
                assert len(hits) == 3
                outcomes.append((started, time.monotonic(), "ok"))
            except StoreError as exc:
                assert exc.unavailable, exc
                assert "SELECT" not in str(exc)
                outcomes.append((started, time.monotonic(), "StoreError"))
            await asyncio.sleep(0.005)

    try:
        tasks = [asyncio.create_task(searcher()) for _ in range(4)]
        await asyncio.sleep(0.5)
        await asyncio.to_thread(_pg_ctl, server, "-m", "fast", "stop")
        down_at = time.monotonic()
        # Longer than a search's longest backoff step (1 s) while the server said it was
        # shutting down: the searches in it fail, and new ones fail at once, before the
        # restart.
        await asyncio.sleep(2.0)
        restart_at = time.monotonic()
        await asyncio.to_thread(server.ensure_postgres_running)
        back_at = time.monotonic()
        await asyncio.sleep(1.0)
        stop.set()
        await asyncio.gather(*tasks)  # any other exception type fails the test here
        during = [o for o in outcomes if down_at < o[0] and o[1] < restart_at]
        after = [o for o in outcomes if o[0] > back_at]
        assert during and all(kind == "StoreError" for *_, kind in during)
        assert after and all(kind == "ok" for *_, kind in after), after
        assert sum(kind == "ok" for *_, kind in outcomes if _[0] < down_at) > 0
    finally:
        await store.close()


@pytest.mark.parametrize("after", ["concurrent", "one_at_a_time"])
async def test_restart_costs_no_request_on_stale_pooled_connections(
    own_server, embeddings, after: str
) -> None:
    """Every search after the restart succeeds at once, whether the searches come
    together or one at a time. One at a time catches a path that invalidates only the
    dead connection it finds: its one retry then takes another dead one, and with ten
    pooled connections the first five sequential searches fail."""
    server, _ = own_server
    store = PgVectorStore(dsn=server.get_uri(), table=unique_table("fault"), embedding=embeddings)
    await store.add_documents([Document(page_content=f"step {i}") for i in range(5)])
    query = await embeddings.aembed_query("step")
    try:
        # Every pooled connection in use at once, so all of them are open at the restart.
        burst = [store.similarity_search_by_vector(query, limit=2) for _ in range(30)]
        await asyncio.gather(*burst)
        await asyncio.to_thread(_pg_ctl, server, "-m", "fast", "restart")
        if after == "concurrent":
            results = await asyncio.gather(
                *[store.similarity_search_by_vector(query, limit=2) for _ in range(5)]
            )
            assert all(len(r) == 2 for r in results)
        else:
            for _ in range(8):
                assert len(await store.similarity_search_by_vector(query, limit=2)) == 2
    finally:
        await store.close()


async def test_restart_costs_no_write_on_stale_pooled_connections(own_server, embeddings) -> None:
    # No pre-ping: a write that finds its pooled connection dead runs once more.
    server, _ = own_server
    store = PgVectorStore(dsn=server.get_uri(), table=unique_table("fault"), embedding=embeddings)
    await store.add_documents([Document(page_content=f"step {i}") for i in range(5)])
    try:
        await asyncio.gather(
            *[store.add_documents([Document(page_content=f"warm {i}")]) for i in range(5)]
        )
        await asyncio.to_thread(_pg_ctl, server, "-m", "fast", "restart")
        await asyncio.gather(
            *[store.add_documents([Document(page_content=f"after {i}")]) for i in range(5)]
        )
        assert await store.count() == 15
    finally:
        await store.close()


async def test_search_while_stopped_is_a_store_error_with_no_sql(own_server, embeddings) -> None:
    server, _ = own_server
    store = PgVectorStore(dsn=server.get_uri(), table=unique_table("fault"), embedding=embeddings)
    await store.add_documents([Document(page_content="step one")])
    try:
        await asyncio.to_thread(_pg_ctl, server, "-m", "fast", "stop")
        with pytest.raises(StoreError) as info:
            await store.similarity_search("step")
        assert info.value.unavailable
        assert info.value.sqlstate is None or info.value.sqlstate[:2] in {"08", "57"}
        assert "SELECT" not in str(info.value) and "[SQL" not in str(info.value)
    finally:
        await store.close()


async def test_a_dropped_collection_is_named_by_the_servers_message(pg_dsn: str) -> None:
    """Both search paths (the driver's, unfiltered; SQLAlchemy's, filtered) report the
    server's message, not just the error's class name."""
    table = unique_table("gone")
    store = PgVectorStore(dsn=pg_dsn, table=table, dimension=4)
    await store.add_documents(
        [Document(page_content="x", metadata={"is_chunk": True})], embeddings=[[1.0, 0, 0, 0]]
    )
    await store.similarity_search_by_vector([1.0, 0, 0, 0], limit=1)
    other = PgVectorStore(dsn=pg_dsn, table=table, dimension=4, create=False)
    await other.drop()
    await other.close()
    try:
        for filter_ in (None, {"is_chunk": True}):
            with pytest.raises(StoreError) as info:
                await store.similarity_search_by_vector([1.0, 0, 0, 0], limit=1, filter=filter_)
            assert info.value.sqlstate == "42P01"
            assert "does not exist" in str(info.value), str(info.value)
    finally:
        await store.close()


async def test_a_refused_statement_carries_its_sqlstate_and_no_sql(store: PgVectorStore) -> None:
    from sqlalchemy import text

    from parrot_parents.stores.postgres.connections.engine import store_errors

    with pytest.raises(StoreError) as info:
        async with store_errors("dividing"), store.engine.connect() as conn:
            await conn.execute(text("SELECT 1 / 0 AS secret_column"))
    assert info.value.sqlstate == "22012" and not info.value.unavailable
    assert "division by zero" in str(info.value)
    assert "secret_column" not in str(info.value) and "SELECT" not in str(info.value)


@contextlib.asynccontextmanager
async def _behind_a_proxy(
    pg_dsn: str, embeddings: Any
) -> AsyncIterator[tuple[RoundTripProxy, PgVectorStore, list[float]]]:
    """A store of five children that reaches the server through :class:`RoundTripProxy`,
    and a query vector; the store closed and the proxy stopped after."""
    proxy = RoundTripProxy(pg_dsn)
    store = PgVectorStore(
        dsn=await proxy.start(), table=unique_table("fault"), embedding=embeddings
    )
    try:
        await store.add_documents([Document(page_content=f"step {i}") for i in range(5)])
        yield proxy, store, await embeddings.aembed_query("step")
    finally:
        await store.close()
        await proxy.stop()


@pytest.mark.parametrize("refused", [0, 1])
@pytest.mark.parametrize("path", ["read pool", "engine"])
async def test_a_read_whose_connections_are_cut_waits_and_succeeds(
    pg_dsn: str, embeddings, path: str, refused: int
) -> None:
    """After a crash, the server ends every session without a word, and for a moment it
    also ends new ones as they arrive. A read that meets this, its pooled connection cut
    and then (``refused``) its fresh one closed before it starts, succeeds: a search (on
    the read pool) or a count (on the engine)."""
    async with _behind_a_proxy(pg_dsn, embeddings) as (proxy, store, query):

        async def read() -> int:
            if path == "engine":
                return await store.count()
            return len(await store.similarity_search_by_vector(query, limit=2))

        expected = await read()
        proxy.cut_all()
        proxy.refuse_next(refused)
        assert await read() == expected


async def test_a_cut_read_does_not_wait_for_a_server_that_is_gone(pg_dsn: str, embeddings) -> None:
    """A read cut twice waits for a server that is restarting (its socket stays, and
    answers that it cannot take sessions yet), never for one that is gone: once nothing
    listens, the read fails at once instead of after the recovery wait."""
    from parrot_parents.stores.postgres.connections.reads import RECOVERY_WAIT_S

    async with _behind_a_proxy(pg_dsn, embeddings) as (proxy, store, query):
        assert len(await store.similarity_search_by_vector(query, limit=2)) == 2
        proxy.cut_all()
        proxy.refuse_next(1)  # the read's fresh connection is closed too: it waits
        search = asyncio.create_task(store.similarity_search_by_vector(query, limit=2))
        await asyncio.sleep(0.2)
        await proxy.stop()  # nothing listens any more
        with pytest.raises(StoreError) as info:
            await asyncio.wait_for(search, timeout=RECOVERY_WAIT_S / 3)
        assert info.value.unavailable


async def test_the_model_record_is_read_again_after_a_restart(own_server, embeddings) -> None:
    """A long-running service reads the collection's model record again every few
    seconds, on the store's engine: a pooled connection the restart left dead is replaced,
    as every other read's is, not reported as an outage of a server that is back."""
    server, _ = own_server
    store = PgVectorStore(dsn=server.get_uri(), table=unique_table("fault"), embedding=embeddings)
    await store.add_documents([Document(page_content=f"step {i}") for i in range(5)])
    try:
        engine, _ = await store.ready()
        before = await store.model_contract.record(engine, fresh=True)
        await asyncio.to_thread(_pg_ctl, server, "-m", "fast", "restart")
        assert await store.model_contract.record(engine, fresh=True) == before
        assert before is not None
    finally:
        await store.close()
