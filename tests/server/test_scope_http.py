"""A bot's scope over HTTP: set with the bot's row (PUT/PATCH), held by ``/context`` and the
document view whatever the body asks, and shown in ``meta``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from parrot_parents.bots.manager import BotManager
from tests.retrieval.test_scope import FILTERS, SCOPES, TOPICS, returned_ids, spread_rows
from tests.server.conftest import AUTH, TOKEN, MakeClient


@pytest.fixture
async def spread(manager: BotManager) -> None:
    """Every row of the handbook in a tenant and a tier of its own."""
    store = manager.get("hr").store
    async with store.engine.begin() as conn:
        await spread_rows(conn, store.qualified_name)


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    scope=SCOPES,
    flt=FILTERS,
    expand=st.booleans(),
    mode=st.sampled_from(["parent", "window:1", "auto_merge:0.3"]),
    budget=st.sampled_from([None, 300]),
    search_mode=st.sampled_from(["hybrid", "dense", "lexical"]),
    limit=st.integers(1, 6),
    topic=st.sampled_from(TOPICS),
)
async def test_over_http_nothing_returned_lies_outside_the_scope(
    make_client: MakeClient,
    manager: BotManager,
    spread: None,
    scope: dict[str, Any],
    flt: dict[str, Any] | None,
    expand: bool,
    mode: str,
    budget: int | None,
    search_mode: str,
    limit: int,
    topic: str,
) -> None:
    client = await make_client(token=TOKEN)
    row = {"collection": "handbook", "scope": scope, "expand_to_parent": expand}
    resp = await client.put("/api/v1/bots/scoped", json=row, headers=AUTH)
    assert resp.status in (200, 201), await resp.text()
    assert (await resp.json())["scope"] == scope
    body: dict[str, Any] = {
        "question": f"When is the {topic} paid?",
        "filter": flt,
        "mode": mode,
        "budget": budget,
        "search_mode": search_mode,
        "limit": limit,
    }
    body = {k: v for k, v in body.items() if v is not None}
    resp = await client.post("/api/v1/bots/scoped/context", json=body, headers=AUTH)
    assert resp.status == 200, await resp.text()
    data = await resp.json()
    assert data["meta"]["scope"]["filter"] == scope
    ids = returned_ids(data)
    store = manager.get("scoped").store
    assert await store.ids_matching(list(ids), scope) == ids


async def test_a_scope_set_with_patch_holds_and_a_bad_one_is_refused(
    make_client: MakeClient, manager: BotManager, spread: None
) -> None:
    client = await make_client(token=TOKEN)
    resp = await client.patch("/api/v1/bots/hr", json={"scope": {"tenant": "a"}}, headers=AUTH)
    assert resp.status == 200, await resp.text()
    store = manager.get("hr").store
    # A filter that would widen the scope to another tenant narrows it to nothing.
    resp = await client.post(
        "/api/v1/bots/hr/context",
        json={"question": "How am I paid?", "filter": {"tenant": "b"}},
        headers=AUTH,
    )
    assert (await resp.json())["passages"] == []
    # The document view shows only the rows in the scope.
    for document in ("pay", "leave"):
        resp = await client.get(f"/api/v1/bots/hr/documents/{document}", headers=AUTH)
        if resp.status == 404:
            continue
        rows = [r["id"] for r in (await resp.json())["rows"]]
        assert rows and await store.ids_matching(rows, {"tenant": "a"}) == set(rows)
    resp = await client.patch(
        "/api/v1/bots/hr", json={"scope": {"tenant": {"$regex": "a"}}}, headers=AUTH
    )
    assert resp.status == 400
    problem = (await resp.json())["details"][0]
    assert problem["key"] == "scope" and "$regex" in problem["message"]
    # A NUL in the words Python and the CLI give it.
    resp = await client.patch("/api/v1/bots/hr", json={"scope": {"tenant": "a\x00"}}, headers=AUTH)
    assert resp.status == 400
    problem = (await resp.json())["details"][0]
    assert problem["key"] == "scope" and "filter['tenant'] contains a NUL" in problem["message"]
    resp = await client.patch("/api/v1/bots/hr", json={"scope": None}, headers=AUTH)
    assert resp.status == 200 and (await resp.json())["scope"] is None


async def test_the_document_view_of_a_scoped_bot_leaves_out_a_parent_holding_rows_outside(
    make_client: MakeClient,
) -> None:
    client = await make_client(token=TOKEN)
    resp = await client.get("/api/v1/bots/hr/documents/pay", headers=AUTH)
    everything = (await resp.json())["rows"]
    first = min(r["end_index"] for r in everything if r["kind"] == "child")
    scope = {"start_index": {"$lt": first}}  # the first child, and its parent's own row
    resp = await client.patch("/api/v1/bots/hr", json={"scope": scope}, headers=AUTH)
    assert resp.status == 200, await resp.text()
    resp = await client.get("/api/v1/bots/hr/documents/pay", headers=AUTH)
    assert resp.status == 200, await resp.text()
    rows = (await resp.json())["rows"]
    assert [r["kind"] for r in rows] == ["child"]
