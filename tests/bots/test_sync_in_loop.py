"""``*_sync`` twins inside a running event loop (an ``async def``, Jupyter, a web handler),
and one store used from several loops: each loop gets its own pools, so every order of
sync and async calls works, and no connection is left orphaned on another loop."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import AsyncIterator

import pytest
from langchain_core.documents import Document

from parrot_parents import Chatbot, PgVectorStore
from tests.conftest import unique_table

PAY = Document(
    "Salaries are paid on the last working day of each month.",
    metadata={"document_id": "pay", "source": "pay.md"},
)


@pytest.fixture
async def table(pg_dsn: str, embeddings) -> AsyncIterator[str]:  # type: ignore[no-untyped-def]
    """A collection holding one document, written and closed by another store."""
    writer = PgVectorStore(dsn=pg_dsn, table=unique_table("loops"), embedding=embeddings)
    await writer.add_documents([PAY])
    await writer.close()
    yield writer.table
    await writer.drop()
    await writer.close()


def _no_orphans(caplog: pytest.LogCaptureFixture) -> None:
    gc.collect()  # a connection dropped on the wrong loop is reported when collected
    bad = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert not bad, [r.getMessage() for r in bad]


async def test_sync_inside_the_loop_then_async(
    pg_dsn: str, embeddings, table: str, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.WARNING)
    bot = Chatbot(store=PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings))
    context, _ = bot.get_vector_context_sync("pay")
    assert "Salaries" in context
    context, _ = await bot.get_vector_context("pay")  # was: attached to a different loop
    assert "Salaries" in context
    assert await bot.store.count() == 1  # type: ignore[union-attr]
    await bot.close()
    _no_orphans(caplog)


async def test_async_then_sync_inside_the_loop_then_async(
    pg_dsn: str, embeddings, table: str, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.WARNING)
    store = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings)
    bot = Chatbot(store=store)
    for _ in range(2):
        context, _ = await bot.get_vector_context("pay")
        assert "Salaries" in context
        context, _ = bot.get_vector_context_sync("pay", search_mode="hybrid")
        assert "Salaries" in context
        # Another task of the blocked loop goes on after the twin returns.
        results = await asyncio.gather(*(store.similarity_search("pay") for _ in range(8)))
        assert all(r for r in results)
    # Closed from the package's loop while this one waits: this loop's pools are closed
    # here once it runs again, and the store reconnects on next use.
    bot.close_sync()
    await asyncio.sleep(0.2)
    context, _ = await bot.get_vector_context("pay")
    assert "Salaries" in context
    await bot.close()
    _no_orphans(caplog)


def test_one_store_serves_successive_asyncio_run_loops(
    pg_dsn: str, embeddings, table: str, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    caplog.set_level(logging.WARNING)
    store = PgVectorStore(dsn=pg_dsn, table=table, embedding=embeddings)
    bot = Chatbot(store=store)
    for _ in range(3):  # each asyncio.run is a new loop; the last one's pools are dead
        context, _ = asyncio.run(bot.get_vector_context("pay"))
        assert "Salaries" in context
        assert bot.get_vector_context_sync("pay")[0] == context
    asyncio.run(bot.close())
    _no_orphans(caplog)
