"""The service's endpoints on a real running app, real database and real model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

import parrot_parents.server as server_pkg
from parrot_parents.bots.manager import BotManager
from parrot_parents.bots.repository import BotRepository
from parrot_parents.server.openapi import build_spec
from tests.server.conftest import AUTH, MakeClient

QUESTION = {"question": "When are salaries paid?"}


async def test_context_returns_passages_and_meta(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.post("/api/v1/bots/hr/context", json=QUESTION)
    assert resp.status == 200
    body = await resp.json()
    assert body["bot"] == "hr"
    assert [p["kind"] for p in body["passages"]] == ["child", "child"]
    assert body["passages"][0]["id"] == "pay#0"
    assert body["passages"][0]["source"] == "pay.md"
    assert body["meta"]["expand_to_parent"] is False and body["meta"]["limit"] == 2
    assert body["context"].startswith("[1] pay.md, characters 0-")
    assert resp.headers["X-Request-Id"]


async def test_context_overrides_per_call(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.post(
        "/api/v1/bots/hr/context",
        json={**QUESTION, "expand_to_parent": True, "limit": 1, "filter": {"document_id": "pay"}},
    )
    body = await resp.json()
    assert resp.status == 200, body
    assert [(p["id"], p["kind"]) for p in body["passages"]] == [("pay", "parent")]
    assert body["meta"]["expand_to_parent"] is True and body["meta"]["limit"] == 1


async def test_mode_and_budget_per_call(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.post(
        "/api/v1/bots/hr_parents/context",
        json={**QUESTION, "mode": "window:1", "budget": 200, "limit": 1},
    )
    body = await resp.json()
    assert resp.status == 200, body
    assert body["meta"]["mode"] == "window:1"
    assert sum(len(p["text"]) for p in body["passages"]) <= 200


async def test_list_bots_shows_loaded_and_failed(make_client: MakeClient) -> None:
    client = await make_client()
    body = await (await client.get("/api/v1/bots")).json()
    by_name = {b["name"]: b for b in body["bots"]}
    assert sorted(by_name) == ["broken", "hr", "hr_parents"]
    assert by_name["hr_parents"]["status"] == "loaded"
    assert by_name["hr_parents"]["expand_to_parent"] is True
    assert by_name["hr_parents"]["description"] == "HR with parents"
    assert by_name["broken"] == {
        "name": "broken",
        "status": "failed",
        "error": "collection: no collection named 'no_such_table' in schema 'public'",
    }


async def test_one_bot(make_client: MakeClient) -> None:
    client = await make_client()
    body = await (await client.get("/api/v1/bots/hr")).json()
    assert body["status"] == "loaded" and body["context_search_limit"] == 2
    assert "created_at" in body and "id" not in body
    resp = await client.get("/api/v1/bots/nobody")
    assert resp.status == 404
    body = await resp.json()
    assert body["error"] == "no bot named 'nobody'"
    # The answer names no other bot; it says where the list is.
    assert "hr" not in body["hint"] and "/api/v1/bots" in body["hint"]


async def test_health_is_degraded_by_a_failed_bot(make_client: MakeClient) -> None:
    client = await make_client(token="secret-token")
    resp = await client.get("/api/v1/health", headers={"Authorization": "Bearer secret-token"})
    assert resp.status == 200
    assert await resp.json() == {
        "status": "degraded",
        "database": {"ok": True},
        "bots": {"hr": {"parent_searcher": True}, "hr_parents": {"parent_searcher": True}},
        "failed_bots": ["broken"],
    }


async def test_health_is_ok_when_every_bot_loads(
    make_client: MakeClient, repo: BotRepository
) -> None:
    await repo.delete("broken")
    client = await make_client()
    body = await (await client.get("/api/v1/health")).json()
    assert body["status"] == "ok" and body["failed_bots"] == []


async def test_unknown_and_failed_bots(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.post("/api/v1/bots/nobody/context", json=QUESTION)
    assert resp.status == 404
    body = await resp.json()
    assert body["error"] == "no bot named 'nobody'"
    assert "hr" not in body["hint"] and "/api/v1/bots" in body["hint"]
    resp = await client.post("/api/v1/bots/broken/context", json=QUESTION)
    assert resp.status == 409
    body = await resp.json()
    assert body["error"] == "bot 'broken' is not available: it failed to load"
    assert body["code"] == "bot_not_loaded"
    assert body["details"] == [
        {"key": "", "message": "collection: no collection named 'no_such_table' in schema 'public'"}
    ]


async def test_a_row_changed_elsewhere_applies_at_the_next_request(
    make_client: MakeClient, repo: BotRepository
) -> None:
    client = await make_client()
    first = await (await client.post("/api/v1/bots/hr/context", json=QUESTION)).json()
    assert {p["kind"] for p in first["passages"]} == {"child"}
    await repo.update("hr", {"expand_to_parent": True})  # as `parrot-parents bots set` does
    second = await (await client.post("/api/v1/bots/hr/context", json=QUESTION)).json()
    assert [p["kind"] for p in second["passages"]] == ["parent"]


async def test_without_auto_reload_a_change_waits_for_reload(
    make_client: MakeClient, repo: BotRepository
) -> None:
    client = await make_client(auto_reload=False)
    await repo.update("hr", {"expand_to_parent": True})
    body = await (await client.post("/api/v1/bots/hr/context", json=QUESTION)).json()
    assert {p["kind"] for p in body["passages"]} == {"child"}
    report = await (await client.post("/api/v1/reload")).json()
    assert sorted(report["loaded"]) == ["hr", "hr_parents"] and "broken" in report["failed"]
    body = await (await client.post("/api/v1/bots/hr/context", json=QUESTION)).json()
    assert [p["kind"] for p in body["passages"]] == ["parent"]


@pytest.mark.parametrize("auto_reload", [True, False])
async def test_a_bot_removed_elsewhere_is_gone_after_a_reload(
    make_client: MakeClient, repo: BotRepository, auto_reload: bool
) -> None:
    client = await make_client(auto_reload=auto_reload)
    assert (await client.post("/api/v1/bots/hr/context", json=QUESTION)).status == 200
    await repo.delete("hr")  # as `parrot-parents bots remove hr` does
    await repo.delete("broken")
    report = await (await client.post("/api/v1/reload")).json()
    assert sorted(report["removed"]) == ["broken", "hr"] and report["failed"] == {}
    listed = await (await client.get("/api/v1/bots")).json()
    assert [b["name"] for b in listed["bots"]] == ["hr_parents"]
    resp = await client.post("/api/v1/bots/hr/context", json=QUESTION)
    assert resp.status == 404
    health = await (await client.get("/api/v1/health")).json()
    assert health["status"] == "ok" and health["failed_bots"] == []


async def test_writes_need_a_token_on_the_server(make_client: MakeClient) -> None:
    client = await make_client()
    for method in ("put", "patch", "delete"):
        resp = await client.request(method, "/api/v1/bots/hr", json={"enabled": False})
        assert resp.status == 403
        assert (await resp.json())["error"] == "bot writes are disabled on a server without a token"


async def test_patch_flips_expand_to_parent_at_once(make_client: MakeClient) -> None:
    client = await make_client(token="t0ken-for-tests")
    resp = await client.patch("/api/v1/bots/hr", json={"expand_to_parent": True}, headers=AUTH)
    body = await resp.json()
    assert resp.status == 200, body
    assert body["expand_to_parent"] is True and body["status"] == "loaded"
    ctx = await (await client.post("/api/v1/bots/hr/context", json=QUESTION, headers=AUTH)).json()
    assert [p["kind"] for p in ctx["passages"]] == ["parent"]


async def test_writes_are_validated_like_the_cli(make_client: MakeClient) -> None:
    client = await make_client(token="t0ken-for-tests")
    resp = await client.patch(
        "/api/v1/bots/hr", json={"context_search_limit": "5", "colour": 1}, headers=AUTH
    )
    assert resp.status == 400
    body = await resp.json()
    assert body["error"].startswith(
        "bot 'hr': context_search_limit must be a positive int (at most 100), got \"5\""
    )
    assert [d["key"] for d in body["details"]] == ["context_search_limit", "colour"]
    resp = await client.put(
        "/api/v1/bots/new",
        json={"collection": "handbook", "reranker_config": {"type": "os:system"}},
        headers=AUTH,
    )
    assert resp.status == 400
    assert (await resp.json())["details"][0]["key"] == "reranker_config.type"


async def test_put_creates_and_delete_removes(make_client: MakeClient) -> None:
    client = await make_client(token="t0ken-for-tests")
    resp = await client.put(
        "/api/v1/bots/faq",
        json={"collection": "handbook", "context_search_limit": 1},
        headers=AUTH,
    )
    assert resp.status == 201
    assert (await resp.json())["status"] == "loaded"
    resp = await client.put("/api/v1/bots/faq", json={"collection": "handbook"}, headers=AUTH)
    assert resp.status == 200 and (await resp.json())["context_search_limit"] is None
    resp = await client.delete("/api/v1/bots/faq", headers=AUTH)
    assert resp.status == 204
    resp = await client.post("/api/v1/bots/faq/context", json=QUESTION, headers=AUTH)
    assert resp.status == 404


async def test_a_database_failure_is_a_503_without_details(
    make_client: MakeClient, manager: BotManager, bots_dsn: str
) -> None:
    # A column gone (a missing table is the collection's absence: a 404, not a failure).
    client = await make_client()
    store = manager.get("hr").store
    async with store.engine.begin() as conn:
        await conn.execute(
            text(f"ALTER TABLE {store.qualified_name} RENAME COLUMN cmetadata TO moved_away")
        )
    try:
        resp = await client.post("/api/v1/bots/hr/context", json=QUESTION)
        raw = await resp.text()
        assert resp.status == 503
        assert json.loads(raw)["error"] == "the database is unavailable"
        for leak in ("SELECT", "handbook", "Traceback", "asyncpg", "UndefinedTable"):
            assert leak not in raw
    finally:
        async with store.engine.begin() as conn:
            await conn.execute(
                text(f"ALTER TABLE {store.qualified_name} RENAME COLUMN moved_away TO cmetadata")
            )


async def test_unknown_routes_and_methods_answer_json(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.get("/nowhere")
    assert resp.status == 404 and (await resp.json())["error"] == "Not Found"
    resp = await client.get("/api/v1/bots/hr/context")
    assert resp.status == 405 and "POST" in resp.headers["Allow"]


async def test_openapi_is_served_and_shipped(make_client: MakeClient) -> None:
    client = await make_client()
    spec = await (await client.get("/openapi.json")).json()
    assert spec == json.loads(json.dumps(build_spec()))
    assert set(spec["paths"]) == {
        "/health",
        "/api/v1/bots",
        "/api/v1/bots/{name}",
        "/api/v1/bots/{name}/context",
        "/api/v1/bots/{name}/ask",
        "/api/v1/bots/{name}/documents/{document_id}",
        "/api/v1/reload",
        "/api/v1/health",
        "/api/v1/collections",
        "/api/v1/collections/{collection}",
        "/api/v1/collections/{collection}/documents",
        "/api/v1/collections/{collection}/documents/delete",
        "/api/v1/collections/{collection}/documents/{document_id}",
    }
    resp = await client.get("/openapi.yaml")
    assert resp.status == 200 and resp.content_type == "application/yaml"
    folder = Path(server_pkg.__file__).parent
    shipped = json.loads((folder / "openapi.json").read_text())
    assert shipped == spec, "run: python -m parrot_parents.server.openapi"
    yaml = pytest.importorskip("yaml")
    assert yaml.safe_load(await resp.text()) == spec


def _schema_keys(spec: dict[str, Any], name: str) -> set[str]:
    return set(spec["components"]["schemas"][name]["properties"])


def test_openapi_request_schemas_come_from_the_validation_models() -> None:
    spec = build_spec()
    assert _schema_keys(spec, "ContextRequest") == {
        "question",
        "expand_to_parent",
        "limit",
        "filter",
        "rerank_candidates",
        "budget",
        "mode",
        "search_mode",
        "rrf_k",
        "dense_weight",
        "lexical_weight",
        "trim",
        "prf",
    }
    assert _schema_keys(spec, "AskRequest") == _schema_keys(spec, "ContextRequest") | {"max_tokens"}


async def test_concurrent_requests_to_one_collection(make_client: MakeClient) -> None:
    import asyncio

    client = await make_client()
    resps = await asyncio.gather(
        *(client.post("/api/v1/bots/hr/context", json=QUESTION) for _ in range(8))
    )
    assert [r.status for r in resps] == [200] * 8


async def test_health_when_the_database_is_down(aiohttp_client: Any, embeddings: Any) -> None:
    from parrot_parents.server.app import create_app

    manager = BotManager("postgresql://postgres@127.0.0.1:9/nowhere", embedding=embeddings)
    try:
        client = await aiohttp_client(create_app(manager))
        resp = await client.get("/health")
        assert resp.status == 503
        assert await resp.json() == {"status": "unavailable"}
        resp = await client.get("/api/v1/health")
        assert resp.status == 503
        assert await resp.json() == {
            "status": "unavailable",
            "database": {"ok": False},
            "bots": {},
            "failed_bots": [],
        }
        resp = await client.post("/api/v1/reload")
        assert resp.status == 503
        assert (await resp.json())["error"] == "the database is unavailable"
    finally:
        await manager.close()


async def test_a_failing_stage_is_reported_without_sql(
    aiohttp_client: Any, repo: BotRepository, bots_dsn: str, embeddings: Any
) -> None:
    from sqlalchemy.exc import ProgrammingError

    from parrot_parents.bots.registries import default_registries
    from parrot_parents.server.app import create_app
    from parrot_parents.stores.parents.abstract import AbstractParentSearcher

    class Failing(AbstractParentSearcher):
        def __init__(self, store: Any) -> None:
            self.store = store

        async def fetch(self, parent_ids: Any) -> Any:
            raise ProgrammingError("SELECT secret FROM internal_table", {}, Exception("boom"))

    registries = default_registries()
    registries.parent_searchers.register("failing_for_test", Failing, replace=True)
    await repo.update(
        "hr", {"expand_to_parent": True, "parent_searcher_config": {"type": "failing_for_test"}}
    )
    manager = BotManager(bots_dsn, embedding=embeddings, registries=registries)
    try:
        await manager.load()
        client = await aiohttp_client(create_app(manager))
        resp = await client.post("/api/v1/bots/hr/context", json=QUESTION)
        raw = await resp.text()
        assert resp.status == 200
        body = json.loads(raw)
        assert [p["kind"] for p in body["passages"]] == ["child", "child"]
        assert body["meta"]["fallbacks"][0]["stage"] == "parent_fetch"
        assert body["meta"]["fallbacks"][0]["error"].startswith("ProgrammingError")
        assert "SELECT" not in raw and "internal_table" not in raw
    finally:
        await manager.close()
