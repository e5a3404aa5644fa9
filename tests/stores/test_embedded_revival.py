"""The embedded server stopped under a long-lived process (an immediate shutdown) is
started again by that process; a server given by DSN never is. Each test runs its own
server in a temporary data directory."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from parrot_parents.embedded import server as embedded
from parrot_parents.embedded.revival import restart_if_down
from parrot_parents.errors import StoreError
from parrot_parents.stores.postgres import PgVectorStore
from parrot_parents.stores.postgres.collections.catalog import (
    collection_names,
    list_collections,
    list_documents,
)
from parrot_parents.stores.postgres.connections.engine import make_engine
from tests.conftest import server_temp_dir, unique_table
from tests.stores.test_embedded_lifecycle import _postmaster_pid, _stop_whatever_runs


@pytest.fixture
def data_dir() -> Iterator[Path]:
    root = server_temp_dir("parrot-parents-revive-")
    yield root / "data"
    embedded.release(root / "data")
    _stop_whatever_runs(root / "data")
    shutil.rmtree(root, ignore_errors=True)


def _stop_immediately(data: Path) -> None:
    """``pg_ctl stop -m immediate``, as the user that runs the server (root's is not)."""
    from pgserver._commands import pg_ctl

    server = embedded.get_server(data)
    pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=server.pgdata, user=server.system_user)
    assert not _running(data)


def _running(data: Path) -> bool:
    return _postmaster_pid(data) is not None


async def _at_most_one_outage(call: Any) -> Any:
    """``call()``, allowed to fail once with an outage (a request in flight at the stop)."""
    try:
        return await call()
    except StoreError as exc:
        assert exc.unavailable, exc
        return await call()


async def test_the_embedded_server_stopped_under_a_store_is_started_again(
    data_dir: Path, embeddings: Any, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    monkeypatch.delenv(embedded.DSN_ENV, raising=False)
    monkeypatch.setenv(embedded.DATA_DIR_ENV, str(data_dir))
    store = PgVectorStore(table=unique_table("revive"), embedding=embeddings)  # no DSN
    await store.add_documents([Document(page_content=f"pump step {i}") for i in range(5)])
    query = await embeddings.aembed_query("pump step")
    assert len(await store.similarity_search_by_vector(query, limit=2)) == 2
    caplog.set_level(logging.WARNING, logger="parrot_parents.embedded.revival")
    try:
        # A search (the read pool), a write (the engine), and a new store's first open.
        _stop_immediately(data_dir)
        hits = await _at_most_one_outage(lambda: store.similarity_search_by_vector(query, limit=2))
        assert len(hits) == 2 and _running(data_dir)
        _stop_immediately(data_dir)
        await _at_most_one_outage(lambda: store.add_documents([Document(page_content="more")]))
        assert await store.count(include_parents=False) == 6
        _stop_immediately(data_dir)
        again = PgVectorStore(table=store.table, embedding=embeddings, create=False)
        assert await again.count(include_parents=False) == 6
        await again.close()
    finally:
        await store.close()
    started = [r for r in caplog.records if "started it again" in r.getMessage()]
    assert len(started) == 3, [r.getMessage() for r in caplog.records]
    assert all(str(data_dir.resolve()) in r.getMessage() for r in started)


async def test_a_server_given_by_dsn_is_never_started(data_dir: Path, embeddings: Any) -> None:
    server = embedded.get_server(data_dir, cleanup_mode="delete")
    store = PgVectorStore(dsn=server.get_uri(), table=unique_table("dsn"), dimension=4)
    await store.add_documents(
        [Document(page_content="x", metadata={"is_chunk": True})], embeddings=[[1.0, 0, 0, 0]]
    )
    try:
        _stop_immediately(data_dir)
        for _ in range(2):
            with pytest.raises(StoreError) as info:
                await store.similarity_search_by_vector([1.0, 0, 0, 0], limit=1)
            assert info.value.unavailable
        with pytest.raises(StoreError):
            await store.count()
        assert not _running(data_dir)
    finally:
        await store.close()
        server.ensure_postgres_running()  # for the fixture's release to stop it cleanly


async def test_the_catalog_reads_through_a_restart_made_elsewhere(
    data_dir: Path, embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The service's collection routes read the catalog on a long-lived engine: after
    # another process started the server again, its pooled connections are dead.
    monkeypatch.delenv(embedded.DSN_ENV, raising=False)
    monkeypatch.setenv(embedded.DATA_DIR_ENV, str(data_dir))
    store = PgVectorStore(table=unique_table("catalog"), embedding=embeddings)  # no DSN
    await store.add_documents([Document(page_content="pump step", metadata={"document_id": "d1"})])
    engine = await make_engine()
    try:
        assert store.table in await collection_names(engine)
        for _ in range(2):
            _stop_immediately(data_dir)
            assert restart_if_down(embedded.get_server(data_dir))  # as another process would
            assert store.table in [c.name for c in await list_collections(engine)]
            _stop_immediately(data_dir)
            assert restart_if_down(embedded.get_server(data_dir))
            assert len(await list_documents(engine, store.table)) == 1
    finally:
        await engine.dispose()
        await store.close()
