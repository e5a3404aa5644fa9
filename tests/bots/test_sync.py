"""The ``*_sync`` entry points, for code without an event loop (no running loop here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from parrot_parents import Chatbot, InTableParentSearcher, PgVectorStore, TextLoader
from tests.conftest import unique_table


def test_ingest_and_retrieve_without_an_event_loop(pg_dsn: str, embeddings, tmp_path: Path) -> None:
    (tmp_path / "pay.md").write_text(
        "Salaries are paid on the last working day of each month.\n\n"
        "Overtime is paid with the next salary, at one and a half times the hourly rate.\n",
        encoding="utf-8",
    )
    store = PgVectorStore(dsn=pg_dsn, table=unique_table("sync"), embedding=embeddings)
    report = TextLoader(tmp_path, embedding=embeddings).ingest_sync(store)
    assert report.documents == 1 and report.children >= 1
    bot = Chatbot(parent_searcher=InTableParentSearcher(store=store), expand_to_parent=True)
    context, meta = bot.get_vector_context_sync("When is overtime paid?", limit=2)
    assert "Overtime is paid" in context and meta["expanded"] is True
    retrieval = bot.retrieve_sync("When is overtime paid?", expand_to_parent=False, limit=1)
    assert [p.kind for p in retrieval.passages] == ["child"]
    with pytest.raises(ValueError, match="unknown option 'top_k'"):
        bot.retrieve_sync("x", top_k=3)  # type: ignore[call-arg]
    from parrot_parents.sync import run_sync

    run_sync(store.drop())
    bot.close_sync()


async def test_run_sync_refuses_its_own_loop() -> None:
    import asyncio

    from parrot_parents.sync import package_loop, run_sync

    async def inner() -> None:
        with pytest.raises(RuntimeError, match="use await"):
            run_sync(asyncio.sleep(0))

    await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(inner(), package_loop()))


def test_the_store_closes_without_an_event_loop(pg_dsn: str, embeddings) -> None:
    from parrot_parents.sync import run_sync

    store = PgVectorStore(dsn=pg_dsn, table=unique_table("syncclose"), embedding=embeddings)
    run_sync(store.connect())
    run_sync(store.drop())
    store.close_sync()
    assert store.connections.home_engine is None
