"""Fixtures of the service tests: a database with bots, the app, and a local LLM server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp.test_utils import TestClient
from sqlalchemy import text

from parrot_parents.bots.manager import BotManager
from parrot_parents.bots.repository import BotRepository
from parrot_parents.server.app import create_app
from tests.llm.conftest import ChatServer, chat_server, llm  # noqa: F401
from tests.migrations.support import (  # noqa: F401
    COLLECTION,
    bots_dsn_fixture,
    template_dsn_fixture,
)

TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give each operation schemathesis collects the node id its name implies.

    Under pytest 9 a schemathesis item's node id leaves out the operation
    (``test_x`` for ``test_x[GET /health]``), so all of a test's operations share one id;
    pytest-xdist hands tests to its workers by id, and ran one operation of the sixteen.
    """
    from schemathesis.pytest.plugin import SchemathesisFunction

    for item in items:
        if not isinstance(item, SchemathesisFunction) or item.parent is None:
            continue
        wanted = f"{item.parent.nodeid}::{item.name}"
        if item.nodeid == wanted:
            continue
        # Only pytest 9 gets here (its node ids are structured; pytest 8 names them apart).
        from _pytest.nodeid import NodeId

        item._id = NodeId.parse(wanted)
        assert item.nodeid == wanted, f"pytest keeps node ids elsewhere now: {item.nodeid}"


@pytest.fixture
async def repo(bots_dsn: str) -> AsyncIterator[BotRepository]:
    """The bots table with ``hr`` (children), ``hr_parents`` (expansion on) and ``broken``."""
    async with BotRepository(bots_dsn) as r:
        await r.create({"name": "hr", "collection": COLLECTION, "context_search_limit": 2})
        await r.create(
            {
                "name": "hr_parents",
                "collection": COLLECTION,
                "expand_to_parent": True,
                "description": "HR with parents",
            }
        )
        engine = await r.engine()
        async with engine.begin() as conn:
            await conn.execute(
                text("INSERT INTO bots (name, collection) VALUES ('broken', 'no_such_table')")
            )
        yield r


@pytest.fixture
async def manager(
    repo: BotRepository,
    bots_dsn: str,
    embeddings: Any,
) -> AsyncIterator[BotManager]:
    m = BotManager(bots_dsn, embedding=embeddings)
    await m.load()
    try:
        yield m
    finally:
        await m.close()


MakeClient = Callable[..., Awaitable[TestClient]]


@pytest.fixture
def make_client(aiohttp_client: Any, manager: BotManager) -> MakeClient:
    """``await make_client(token=..., llm=..., max_body_bytes=...)``: a running app."""

    async def make(**kwargs: Any) -> TestClient:
        return await aiohttp_client(create_app(manager, **kwargs))

    return make
