"""BotManager and Chatbot.from_database on real databases and the real embedding model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.bots.manager import BotManager
from parrot_parents.bots.repository import BotRepository
from parrot_parents.errors import BotConfigError, BotNotFoundError
from tests.migrations.support import (  # noqa: F401
    COLLECTION,
    bots_dsn_fixture,
    template_dsn_fixture,
)

QUESTION = "When are salaries paid?"


@pytest.fixture
async def repo(bots_dsn: str) -> AsyncIterator[BotRepository]:
    async with BotRepository(bots_dsn) as r:
        yield r


@pytest.fixture
async def manager(bots_dsn: str, embeddings: Any) -> AsyncIterator[BotManager]:
    m = BotManager(bots_dsn, embedding=embeddings)
    try:
        yield m
    finally:
        await m.close()


async def _raw(repo: BotRepository, sql: str, **params: Any) -> None:
    engine = await repo.engine()
    async with engine.begin() as conn:
        await conn.execute(text(sql), params)


def _kinds(retrieval: Any) -> list[str]:
    return [p.kind for p in retrieval.passages]


async def test_enabled_rows_load_and_disabled_rows_do_not(
    repo: BotRepository, manager: BotManager
) -> None:
    await repo.create({"name": "hr", "collection": COLLECTION, "description": "HR"})
    await repo.create({"name": "off", "collection": COLLECTION, "enabled": False})
    report = await manager.load()
    assert report.loaded == ["hr"] and not report.failed
    assert sorted(manager.bots) == ["hr"]
    bot = manager.get("hr")
    assert bot.description == "HR" and bot.collection == COLLECTION
    with pytest.raises(BotNotFoundError, match="no bot named 'off'"):
        manager.get("off")


async def test_a_bad_row_is_reported_and_never_stops_the_others(
    repo: BotRepository, manager: BotManager
) -> None:
    # Rows written with plain SQL, as an operator might: each is wrong in its own way, and
    # they sort before and after the good one.
    await _raw(
        repo,
        "INSERT INTO bots (name, collection, reranker_config) VALUES"
        " ('a_unknown_type', :c, CAST(:unknown AS jsonb)),"
        " ('b_bad_key', :c, CAST(:bad_key AS jsonb)),"
        " ('c_missing_collection', 'no_such_table', NULL),"
        " ('d_missing_model', :c, CAST(:missing AS jsonb)),"
        " ('m_good', :c, NULL),"
        " ('z_wrong_type', :c, CAST(:wrong AS jsonb))",
        c=COLLECTION,
        unknown=json.dumps({"type": "os:system"}),
        bad_key=json.dumps({"type": "cross_encoder", "batchsize": 8}),
        missing=json.dumps({"type": "cross_encoder", "model": "/nonexistent/model"}),
        wrong=json.dumps({"type": "cross_encoder", "batch_size": "8"}),
    )
    report = await manager.load()
    assert report.loaded == ["m_good"]
    assert sorted(report.failed) == [
        "a_unknown_type",
        "b_bad_key",
        "c_missing_collection",
        "d_missing_model",
        "z_wrong_type",
    ]
    assert report.failed["a_unknown_type"].startswith(
        "reranker_config.type: unknown reranker type 'os:system'"
    )
    assert report.failed["b_bad_key"].startswith("reranker_config.batchsize: unknown key")
    assert report.failed["c_missing_collection"] == (
        "collection: no collection named 'no_such_table' in schema 'public'"
    )
    assert (
        "reranker_config: cannot load cross-encoder '/nonexistent/model'"
        in (report.failed["d_missing_model"])
    )
    assert report.failed["z_wrong_type"] == (
        'reranker_config.batch_size: Input should be a valid integer, got "8"'
    )
    retrieval = await manager.get("m_good").retrieve(QUESTION)
    assert retrieval.passages
    with pytest.raises(BotConfigError, match=r"bot 'b_bad_key': reranker_config.batchsize"):
        manager.get("b_bad_key")


async def test_flipping_expand_to_parent_applies_at_the_next_refresh(
    repo: BotRepository, manager: BotManager
) -> None:
    await repo.create({"name": "hr", "collection": COLLECTION, "context_search_limit": 2})
    await manager.load()
    before = manager.get("hr")
    assert set(_kinds(await before.retrieve(QUESTION))) == {"child"}

    await repo.update("hr", {"expand_to_parent": True})
    assert manager.get("hr") is before  # nothing changes until the refresh
    report = await manager.refresh()
    assert report.loaded == ["hr"]
    after = manager.get("hr")
    assert after.expand_to_parent is True
    retrieval = await after.retrieve(QUESTION)
    assert _kinds(retrieval) == ["parent"]
    assert retrieval.passages[0].id == "pay"

    # A change made with plain SQL is picked up the same way.
    await _raw(repo, "UPDATE bots SET expand_to_parent = false WHERE name = 'hr'")
    await manager.refresh()
    assert set(_kinds(await manager.get("hr").retrieve(QUESTION))) == {"child"}


async def test_refresh_without_changes_keeps_the_same_bots(
    repo: BotRepository, manager: BotManager
) -> None:
    await repo.create({"name": "hr", "collection": COLLECTION})
    await manager.load()
    bot = manager.get("hr")
    report = await manager.refresh()
    assert not report.changed and report.unchanged == ["hr"]
    assert manager.get("hr") is bot


async def test_reload_rebuilds_every_bot(repo: BotRepository, manager: BotManager) -> None:
    await repo.create({"name": "hr", "collection": COLLECTION})
    await manager.load()
    bot = manager.get("hr")
    report = await manager.reload()
    assert report.loaded == ["hr"] and manager.get("hr") is not bot


async def test_deleted_disabled_and_fixed_rows_on_refresh(
    repo: BotRepository, manager: BotManager
) -> None:
    await repo.create({"name": "a", "collection": COLLECTION})
    await repo.create({"name": "b", "collection": COLLECTION})
    await _raw(repo, "INSERT INTO bots (name, collection) VALUES ('c', 'missing')")
    await manager.load()
    assert sorted(manager.bots) == ["a", "b"] and list(manager.errors) == ["c"]
    await repo.delete("a")
    await repo.update("b", {"enabled": False})
    await repo.update("c", {"collection": COLLECTION})
    report = await manager.refresh()
    assert sorted(report.removed) == ["a", "b"] and report.loaded == ["c"]
    assert sorted(manager.bots) == ["c"] and manager.errors == {}


async def test_per_call_overrides_beat_the_row(repo: BotRepository, manager: BotManager) -> None:
    await repo.create(
        {
            "name": "hr",
            "collection": COLLECTION,
            "expand_to_parent": True,
            "context_search_limit": 3,
        }
    )
    await manager.load()
    bot = manager.get("hr")
    # The row's expansion applies: its 3 children fold into their parents (how many
    # depends on the fused ranking, not on the row).
    parents = _kinds(await bot.retrieve(QUESTION))
    assert parents and set(parents) == {"parent"} and len(parents) <= 3
    children = await bot.retrieve(QUESTION, expand_to_parent=False, limit=2)
    assert _kinds(children) == ["child", "child"]


async def test_mode_and_budget_from_the_row_reach_the_bot(
    repo: BotRepository, manager: BotManager
) -> None:
    await repo.create(
        {
            "name": "w",
            "collection": COLLECTION,
            "expand_to_parent": True,
            "expansion_mode": "window:1",
            "context_budget": 500,
            "context_search_limit": 1,
        }
    )
    await manager.load()
    bot = manager.get("w")
    assert bot.expansion_mode == "window:1" and bot.context_budget == 500
    retrieval = await bot.retrieve(QUESTION)
    assert retrieval.meta.get("mode") == "window:1"
    assert sum(len(p.text) for p in retrieval.passages) <= 500


async def test_a_reranker_from_the_row(
    repo: BotRepository, manager: BotManager, tmp_path: Path
) -> None:
    from parrot_parents.rerankers.testing import build_tiny_cross_encoder

    model = build_tiny_cross_encoder(tmp_path / "tiny")
    await repo.create(
        {
            "name": "rr",
            "collection": COLLECTION,
            "reranker_config": {"type": "cross_encoder", "model": str(model), "batch_size": 4},
        }
    )
    report = await manager.load()
    assert report.loaded == ["rr"]
    bot = manager.get("rr")
    assert bot.reranker.to_dict()["batch_size"] == 4
    retrieval = await bot.retrieve(QUESTION, limit=2)
    assert retrieval.meta["reranked"] is True and len(retrieval.passages) == 2


async def test_health_reports_the_database_and_each_parent_searcher(
    repo: BotRepository, manager: BotManager
) -> None:
    await repo.create({"name": "hr", "collection": COLLECTION})
    await repo.create({"name": "plain", "collection": COLLECTION, "parent_searcher_config": None})
    await _raw(repo, "INSERT INTO bots (name, collection) VALUES ('broken', 'missing')")
    await manager.load()
    health = await manager.health()
    assert health == {
        "database": True,
        "bots": {"hr": {"parent_searcher": True}, "plain": {"parent_searcher": None}},
        "failed": ["broken"],
    }


async def test_bots_on_one_collection_share_one_store(
    repo: BotRepository, manager: BotManager
) -> None:
    await repo.create({"name": "a", "collection": COLLECTION})
    await repo.create({"name": "b", "collection": COLLECTION, "expand_to_parent": True})
    await manager.load()
    assert manager.get("a").store is manager.get("b").store


async def test_from_database_loads_one_row(
    repo: BotRepository,
    bots_dsn: str,
    embeddings: Any,
) -> None:
    await repo.create({"name": "hr", "collection": COLLECTION, "expand_to_parent": True})
    bot = await Chatbot.from_database("hr", dsn=bots_dsn, embedding=embeddings)
    try:
        assert isinstance(bot, Chatbot) and bot.name == "hr"
        retrieval = await bot.retrieve(QUESTION)
        assert [p.id for p in retrieval.passages] == ["pay", "leave"]
        assert _kinds(retrieval) == ["parent", "parent"]
    finally:
        await bot.close()


async def test_from_database_errors(
    repo: BotRepository,
    bots_dsn: str,
    embeddings: Any,
) -> None:
    await repo.create({"name": "off", "collection": COLLECTION, "enabled": False})
    await _raw(
        repo,
        "INSERT INTO bots (name, collection, reranker_config) VALUES ('bad', :c, :r)",
        c=COLLECTION,
        r=json.dumps({"type": "cross_encoder", "max_length": 2}),
    )
    with pytest.raises(BotNotFoundError, match="no bot named 'nobody'"):
        await Chatbot.from_database("nobody", dsn=bots_dsn, embedding=embeddings)
    with pytest.raises(BotNotFoundError, match="the bot is disabled"):
        await Chatbot.from_database("off", dsn=bots_dsn, embedding=embeddings)
    with pytest.raises(
        BotConfigError,
        match=r"bot 'bad': reranker_config.max_length: Input should be greater than or equal to 4",
    ):
        await Chatbot.from_database("bad", dsn=bots_dsn, embedding=embeddings)


async def test_repository_validates_every_write(repo: BotRepository) -> None:
    await repo.create({"name": "hr", "collection": COLLECTION})
    with pytest.raises(BotConfigError, match="bot 'hr': name: a bot with this name already"):
        await repo.create({"name": "hr", "collection": COLLECTION})
    with pytest.raises(BotConfigError, match="bot 'hr': context_search_limit must be a positive"):
        await repo.update("hr", {"context_search_limit": "7"})
    with pytest.raises(BotConfigError, match=r"bot 'hr': reranker_config.type: missing 'type'"):
        await repo.update("hr", {"reranker_config.model": "/m"})
    with pytest.raises(BotNotFoundError):
        await repo.update("nobody", {"enabled": False})
    with pytest.raises(BotNotFoundError):
        await repo.delete("nobody")
    # Nothing invalid reached the table.
    assert (await repo.get("hr")).context_search_limit is None
    settings, created = await repo.put("hr", {"collection": COLLECTION, "enabled": False})
    assert not created and settings.enabled is False
    _, created = await repo.put("new", {"collection": COLLECTION})
    assert created


async def test_closing_one_bot_leaves_the_shared_store_open(
    repo: BotRepository, manager: BotManager
) -> None:
    await repo.create({"name": "hr", "collection": COLLECTION})
    await repo.create({"name": "hr2", "collection": COLLECTION})
    await manager.load()
    hr, hr2 = manager.get("hr"), manager.get("hr2")
    assert hr.store is hr2.store and not hr.owns_store
    engine = hr2.store.engine  # type: ignore[union-attr]
    await hr.close()  # must not dispose of the pool that hr2 still uses
    assert hr2.store.engine is engine  # type: ignore[union-attr]
    assert (await hr2.retrieve(QUESTION)).passages


async def test_a_bot_from_the_database_owns_its_store(
    repo: BotRepository, bots_dsn: str, embeddings: Any
) -> None:
    await repo.create({"name": "hr", "collection": COLLECTION})
    bot = await Chatbot.from_database("hr", dsn=bots_dsn, embedding=embeddings)
    assert bot.owns_store
    await bot.close()
    assert bot.store.connections.home_engine is None  # type: ignore[union-attr]


async def test_every_collection_shares_one_pool(
    repo: BotRepository, manager: BotManager, bots_dsn: str
) -> None:
    await repo.create({"name": "hr", "collection": COLLECTION})
    await manager.load()
    store = manager.get("hr").store
    assert store.engine is await manager.repository.engine()  # type: ignore[union-attr]


def test_an_unknown_name_s_hint_names_at_most_ten_bots() -> None:
    # A service of many bots answers an unknown name with a hint of bounded length.
    manager = BotManager("postgresql://unused@localhost/none")
    for i in range(25):
        manager.bots[f"bot{i:02d}"] = Chatbot.__new__(Chatbot)
    with pytest.raises(BotNotFoundError) as raised:
        manager.get("nobody")
    hint = str(raised.value.hint)
    assert "bot09" in hint and "bot10" not in hint and "15 more" in hint
