"""A bot row chooses the Milvus backend by type name: ``{"type": "milvus"}``.

The row names no URI or path: the deployment's ``$PARROT_PARENTS_MILVUS_URI`` does.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from typing import Any

import pytest

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.bots.manager import BotManager
from parrot_parents.bots.repository import BotRepository
from parrot_parents.errors import BotConfigError
from parrot_parents.stores.parents.in_table import InTableParentSearcher
from tests.migrations.support import (  # noqa: F401
    COLLECTION,
    bots_dsn_fixture,
    handbook_documents,
    template_dsn_fixture,
)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("pymilvus") is None, reason="pymilvus is not installed"
)

from parrot_parents.stores.milvus import MilvusParentSearcher, MilvusStore  # noqa: E402

QUESTION = "When are salaries paid?"


@pytest.fixture
async def milvus_uri(monkeypatch: pytest.MonkeyPatch, embeddings: Any) -> str:
    uri = str(Path(tempfile.mkdtemp(prefix="milvus-bots-")) / "milvus.db")
    store = MilvusStore(uri, COLLECTION, embedding=embeddings)
    await store.add_documents(handbook_documents())  # the same rows as the PostgreSQL table
    await store.close()
    monkeypatch.setenv("PARROT_PARENTS_MILVUS_URI", uri)
    return uri


async def test_a_row_of_type_milvus_searches_milvus(
    bots_dsn: str, milvus_uri: str, embeddings: Any
) -> None:
    async with BotRepository(bots_dsn) as repo:
        for name, kind in (("pg", "in_table"), ("mv", "milvus")):
            await repo.create(
                {
                    "name": name,
                    "collection": COLLECTION,
                    "expand_to_parent": True,
                    "parent_searcher_config": {"type": kind},
                }
            )
    pg = await Chatbot.from_database("pg", dsn=bots_dsn, embedding=embeddings)
    mv = await Chatbot.from_database("mv", dsn=bots_dsn, embedding=embeddings)
    try:
        assert isinstance(pg.parent_searcher, InTableParentSearcher)
        assert isinstance(mv.store, MilvusStore) and mv.store.uri == milvus_uri
        assert isinstance(mv.parent_searcher, MilvusParentSearcher)
        assert mv.parent_searcher.store is mv.store
        want = await pg.retrieve(QUESTION)
        got = await mv.retrieve(QUESTION)
        assert [p.id for p in got.passages] == [p.id for p in want.passages] == ["pay", "leave"]
        assert got.meta.expanded is True
    finally:
        await pg.close()
        await mv.close()

    manager = BotManager(bots_dsn, embedding=embeddings)
    try:
        report = await manager.load()
        assert sorted(report.loaded) == ["mv", "pg"] and not report.failed
        assert isinstance(manager.get("mv").store, MilvusStore)
        assert manager.get("mv").store is not manager.get("pg").store
        r = await manager.get("mv").retrieve(QUESTION)
        assert [p.id for p in r.passages] == ["pay", "leave"]
    finally:
        await manager.close()


async def test_milvus_rows_fail_clearly(
    bots_dsn: str, monkeypatch: pytest.MonkeyPatch, embeddings: Any
) -> None:
    async with BotRepository(bots_dsn) as repo:
        await repo.create(
            {"name": "mv", "collection": COLLECTION, "parent_searcher_config": {"type": "milvus"}}
        )
    monkeypatch.delenv("PARROT_PARENTS_MILVUS_URI", raising=False)
    with pytest.raises(BotConfigError, match="PARROT_PARENTS_MILVUS_URI"):
        await Chatbot.from_database("mv", dsn=bots_dsn, embedding=embeddings)
    empty = str(Path(tempfile.mkdtemp(prefix="milvus-empty-")) / "milvus.db")
    monkeypatch.setenv("PARROT_PARENTS_MILVUS_URI", empty)
    with pytest.raises(BotConfigError, match=r"collection.*does not exist"):
        await Chatbot.from_database("mv", dsn=bots_dsn, embedding=embeddings)


async def test_a_scoped_bot_on_milvus_never_leaves_its_scope(
    milvus_uri: str, embeddings: Any
) -> None:
    # The handbook's rows hold document_id "pay" or "leave"; a scope on one of them.
    store = MilvusStore(milvus_uri, COLLECTION, embedding=embeddings, create=False)
    try:
        bot = Chatbot(
            store=store,
            parent_searcher=MilvusParentSearcher(store=store),
            expand_to_parent=True,
            scope={"document_id": "pay"},
            owns_store=False,
        )
        r = await bot.retrieve("How many days of paid leave do I have?", limit=6)
        assert r.passages and all(p.document_id == "pay" for p in r.passages)
        assert r.meta.scope == {
            "filter": {"document_id": "pay"},
            "withheld": [],
            "partial_parents": [],
        }
        # A call filter on another key narrows the scope (merged into one filter, which
        # Milvus's subset of the language takes).
        r = await bot.retrieve("When are salaries paid?", filter={"is_chunk": True})
        assert r.passages and all(p.document_id == "pay" for p in r.passages)
        ids = [p.id for p in r.passages]
        assert await store.ids_matching(ids, {"document_id": "leave"}) == set()
        assert await store.ids_matching(ids, {"document_id": "pay"}) == set(ids)
    finally:
        await store.close()
