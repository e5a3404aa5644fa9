"""What BotManager serves is what the bots table holds, after any sequence of row changes.

The changes go through the repository (as the CLI and the HTTP API write) and through plain
SQL (as an operator might); a plain dict models the table, and after each reload or refresh
the manager must serve exactly its enabled rows: loaded when their collection exists,
failed when it does not, and gone when deleted or disabled.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from sqlalchemy import text

from parrot_parents.bots.manager import BotManager
from parrot_parents.bots.repository import BotRepository
from parrot_parents.errors import BotConfigError, BotNotFoundError
from parrot_parents.stores.postgres import PgVectorStore
from tests.migrations.support import (  # noqa: F401
    COLLECTION,
    bots_dsn_fixture,
    template_dsn_fixture,
)

MISSING = "no_such_collection"
NAMES = ("a", "b", "c")

Row = dict[str, Any]


@pytest.fixture
async def repo(bots_dsn: str) -> AsyncIterator[BotRepository]:
    async with BotRepository(bots_dsn) as r:
        yield r


async def _sql(repo: BotRepository, sql: str, **params: Any) -> None:
    engine = await repo.engine()
    async with engine.begin() as conn:
        await conn.execute(text(sql), params)


@pytest.mark.parametrize("how", ["reload", "reload_one", "refresh"])
async def test_a_removed_bot_is_dropped_by_every_kind_of_reload(
    repo: BotRepository, bots_dsn: str, embeddings: Any, how: str
) -> None:
    await repo.create({"name": "zombie", "collection": COLLECTION})
    await repo.create({"name": "other", "collection": COLLECTION})
    await _sql(repo, "INSERT INTO bots (name, collection) VALUES ('broken', :c)", c=MISSING)
    async with BotManager(bots_dsn, embedding=embeddings) as manager:
        assert sorted(manager.bots) == ["other", "zombie"] and list(manager.errors) == ["broken"]
        await repo.delete("zombie")  # as `parrot-parents bots remove zombie` does
        await repo.delete("broken")
        if how == "reload":
            report = await manager.reload()
        elif how == "reload_one":  # rebuilds that bot, and drops every row gone
            report = await manager.reload("zombie")
        else:
            report = await manager.refresh()
        assert sorted(report.removed) == ["broken", "zombie"]
        assert sorted(manager.bots) == ["other"] and manager.errors == {}
        with pytest.raises(BotNotFoundError, match="no bot named 'zombie'"):
            manager.get("zombie")
        assert (await manager.health())["failed"] == []


@pytest.mark.parametrize("how", ["reload", "reload_one"])
async def test_a_bot_whose_collection_was_dropped_fails_at_the_reload(
    repo: BotRepository, bots_dsn: str, embeddings: Any, how: str
) -> None:
    table = f"dropped_{how}"
    writer = PgVectorStore(dsn=bots_dsn, table=table, embedding=embeddings)
    await writer.add_documents([Document(page_content="pump step", metadata={"document_id": "d"})])
    await writer.close()
    await repo.create({"name": "orphan", "collection": table})
    async with BotManager(bots_dsn, embedding=embeddings) as manager:
        assert list(manager.bots) == ["orphan"]
        dropper = PgVectorStore(dsn=bots_dsn, table=table, embedding=embeddings, create=False)
        await dropper.drop()  # as `parrot-parents drop` does, behind the service's back
        await dropper.close()
        report = await (manager.reload() if how == "reload" else manager.reload("orphan"))
        assert list(report.failed) == ["orphan"] and manager.bots == {}
        with pytest.raises(BotConfigError, match=f"no collection named '{table}'"):
            manager.get("orphan")
        assert (await manager.health())["failed"] == ["orphan"]


# -- random sequences against a model of the table ---------------------------------------

_channel = st.sampled_from(["repo", "sql"])
_name = st.sampled_from(NAMES)
_change = st.one_of(
    st.tuples(
        st.just("add"),
        _name,
        _channel,
        st.sampled_from([COLLECTION, MISSING]),
        st.booleans(),
        st.integers(1, 5),
    ),
    st.tuples(st.just("remove"), _name, _channel),
    st.tuples(st.just("set"), _name, _channel, st.just("enabled"), st.booleans()),
    st.tuples(
        st.just("set"),
        _name,
        _channel,
        st.just("collection"),
        st.sampled_from([COLLECTION, MISSING]),
    ),
    st.tuples(st.just("set"), _name, _channel, st.just("context_search_limit"), st.integers(1, 5)),
)
#: Each change is followed by nothing, a reload or a refresh, then checked.
_step = st.tuples(_change, st.sampled_from([None, "reload", "refresh"]))


async def _apply(repo: BotRepository, table: dict[str, Row], change: tuple[Any, ...]) -> None:
    """Apply ``change`` to the database and to ``table``; a change that the table's state
    makes impossible (adding a name taken, changing a name absent) is skipped."""
    kind, name, channel = change[:3]
    if kind == "add" and name not in table:
        collection, enabled, limit = change[3:]
        row = {"collection": collection, "enabled": enabled, "context_search_limit": limit}
        if channel == "repo":
            await repo.create({"name": name, **row})
        else:
            await _sql(
                repo,
                "INSERT INTO bots (name, collection, enabled, context_search_limit)"
                " VALUES (:n, :c, :e, :l)",
                n=name,
                c=collection,
                e=enabled,
                l=limit,
            )
        table[name] = row
    elif kind == "remove" and name in table:
        if channel == "repo":
            await repo.delete(name)
        else:
            await _sql(repo, "DELETE FROM bots WHERE name = :n", n=name)
        del table[name]
    elif kind == "set" and name in table:
        key, value = change[3:]
        if channel == "repo":
            await repo.update(name, {key: value})
        else:
            # The key comes from the fixed list above, never from data.
            await _sql(repo, f"UPDATE bots SET {key} = :v WHERE name = :n", v=value, n=name)
        table[name][key] = value


def _served(manager: BotManager) -> tuple[dict[str, tuple[str, int | None]], set[str]]:
    bots = {
        n: (b.collection, b.settings.context_search_limit if b.settings else None)
        for n, b in manager.bots.items()
    }
    return bots, set(manager.errors)


def _expected(table: dict[str, Row]) -> tuple[dict[str, tuple[str, int | None]], set[str]]:
    enabled = {n: r for n, r in table.items() if r["enabled"]}
    loaded = {
        n: (r["collection"], r["context_search_limit"])
        for n, r in enabled.items()
        if r["collection"] == COLLECTION
    }
    return loaded, {n for n, r in enabled.items() if r["collection"] != COLLECTION}


async def _check(manager: BotManager, table: dict[str, Row], how: str) -> None:
    before = set(manager.bots) | set(manager.errors)
    report = await (manager.reload() if how == "reload" else manager.refresh())
    loaded, failed = _expected(table)
    assert _served(manager) == (loaded, failed), how
    assert sorted(report.removed) == sorted(before - set(loaded) - failed), how
    for name in set(NAMES) - set(loaded) - failed:
        with pytest.raises(BotNotFoundError):
            manager.get(name)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(_step, min_size=1, max_size=12))
@example(  # the reported case: a bot removed with the CLI, then a reload
    steps=[
        (("add", "a", "repo", COLLECTION, True, 1), "reload"),
        (("remove", "a", "repo"), "reload"),
    ]
)
def test_the_served_bots_follow_any_sequence_of_row_changes(
    bots_dsn: str, embeddings: Any, steps: list[tuple[tuple[Any, ...], str | None]]
) -> None:
    async def scenario() -> None:
        async with BotRepository(bots_dsn) as repo:
            await _sql(repo, "DELETE FROM bots")
            table: dict[str, Row] = {}
            manager = BotManager(bots_dsn, embedding=embeddings, retry_failed_s=0.0)
            try:
                await manager.load()
                for change, sync in steps:
                    await _apply(repo, table, change)
                    if sync is not None:
                        await _check(manager, table, sync)
                await _check(manager, table, "refresh")
                await _check(manager, table, "reload")
                await _check(manager, table, "refresh")
            finally:
                await manager.close()

    asyncio.run(scenario())
