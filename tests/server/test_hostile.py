"""Client input is never a server error, and an outage is a 503."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from parrot_parents.bots.manager import BotManager
from parrot_parents.errors import ConfigurationError
from parrot_parents.stores.filters import validate_filter
from tests.server.conftest import AUTH, MakeClient

URL = "/api/v1/bots/hr/context"
QUESTION = {"question": "When are salaries paid?"}


@pytest.mark.parametrize(
    "body",
    [
        b'{"question": "q", "filter": {"year": NaN}}',
        b'{"question": "q", "filter": {"year": Infinity}}',
        b'{"question": "q", "filter": {"year": -Infinity}}',
        b'{"question": "q", "filter": {"year": 1e400}}',
        b'{"question": "q", "filter": {"year": {"$gt": 1e400}}}',
        b'{"question": "q", "limit": 1' + b"0" * 5000 + b"}",
        b"[" * 32_000 + b"]" * 32_000,
        b'{"question": "q", "filter": ' + b'{"a": ' * 100 + b"1" + b"}" * 100 + b"}",
    ],
    ids=["nan", "inf", "-inf", "1e400", "op-1e400", "huge-int", "deep-nesting", "deep-object"],
)
async def test_values_json_cannot_carry_are_400_not_valid_json(
    make_client: MakeClient, body: bytes
) -> None:
    client = await make_client(max_body_bytes=256 * 1024)
    resp = await client.post(URL, data=body, headers={"Content-Type": "application/json"})
    assert resp.status == 400, await resp.text()
    assert (await resp.json())["error"].startswith("the body is not valid JSON")


@pytest.mark.parametrize(
    "body",
    [
        {"question": "q", "filter": {"a\u0000": "x"}},
        {"question": "q", "filter": {"source": "x\u0000"}},
        {"question": "q\u0000"},
        {"question": "q", "filter": {"year": {"$regex": "x"}}},
        {"question": "q", "filter": {"year": {"$gt": True}}},
        {"question": "q", "filter": {"document_id": {}}},
        {"question": "q", "filter": {"$and": {"a": 1}}},
    ],
    ids=["nul-key", "nul-value", "nul-question", "unknown-op", "bool-order", "{}", "and-dict"],
)
async def test_bad_filter_values_are_400(make_client: MakeClient, body: dict[str, Any]) -> None:
    client = await make_client()
    resp = await client.post(URL, json=body)
    data = await resp.json()
    assert resp.status == 400, data
    assert "database" not in data["error"]
    if "filter" in body and "\\u0000" not in json.dumps(body):
        # The store's own words, not the validation library's.
        with pytest.raises(ConfigurationError) as store_said:
            validate_filter(body["filter"])
        assert store_said.value.message in data["error"]


async def test_filter_operators_over_http(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.post(
        URL, json={**QUESTION, "filter": {"document_id": {"$in": ["pay", "nothing"]}}}
    )
    body = await resp.json()
    assert resp.status == 200, body
    assert body["passages"] and {p["document_id"] for p in body["passages"]} == {"pay"}
    resp = await client.post(URL, json={**QUESTION, "filter": {"document_id": {"$nin": ["pay"]}}})
    body = await resp.json()
    assert resp.status == 200 and all(p["document_id"] != "pay" for p in body["passages"])
    # null means a stored null, as in the Python API: no document has one.
    resp = await client.post(URL, json={**QUESTION, "filter": {"document_id": None}})
    body = await resp.json()
    assert resp.status == 200 and body["passages"] == [], body


@pytest.mark.parametrize("method", ["get", "delete"])
async def test_a_name_with_nul_is_404(make_client: MakeClient, method: str) -> None:
    client = await make_client(token="t0ken-for-tests")
    resp = await client.request(method, "/api/v1/bots/hr%00", headers=AUTH)
    assert resp.status == 404, await resp.text()


async def test_patch_with_nul_is_400(make_client: MakeClient) -> None:
    client = await make_client(token="t0ken-for-tests")
    resp = await client.patch("/api/v1/bots/hr", json={"description": "a\u0000b"}, headers=AUTH)
    assert resp.status == 400, await resp.text()
    assert (await resp.json())["details"][0]["key"] == "description"


async def test_get_on_a_post_route_says_to_use_post(make_client: MakeClient) -> None:
    client = await make_client()
    resp = await client.get(URL)
    assert resp.status == 405
    body = await resp.json()
    assert resp.headers["Allow"] == "POST" and "POST" in body["hint"]


async def test_a_failed_bot_loads_once_its_collection_exists(
    make_client: MakeClient, manager: BotManager, bots_dsn: str, embeddings: Any
) -> None:
    from parrot_parents.stores.postgres import PgVectorStore

    manager.retry_failed_s = 0.0
    client = await make_client()
    resp = await client.post("/api/v1/bots/broken/context", json=QUESTION)
    assert resp.status == 409
    created = PgVectorStore(dsn=bots_dsn, table="no_such_table", embedding=embeddings)
    await created.connect()
    try:
        resp = await client.post("/api/v1/bots/broken/context", json=QUESTION)
        assert resp.status == 200, await resp.text()
    finally:
        await created.drop()
        await created.close()


async def test_database_gone_is_503_with_retry_after(
    make_client: MakeClient, manager: BotManager
) -> None:
    from parrot_parents.stores.postgres.connections.engine import make_engine
    from parrot_parents.stores.postgres.connections.read_pool import ReadPool

    client = await make_client()
    store = manager.get("hr").store
    live, live_reads = store.connections.home_engine, store.connections.home_reads
    # Point both pools at a server that is not there: what a stopped PostgreSQL looks like.
    gone = {"host": "127.0.0.1", "port": 9, "user": "postgres", "database": "gone"}
    store.connections.home_engine = await make_engine("postgresql://postgres@127.0.0.1:9/gone")
    store.connections.home_reads = ReadPool(gone, {})
    try:
        resps = await asyncio.gather(*(client.post(URL, json=QUESTION) for _ in range(3)))
        for resp in resps:
            raw = await resp.text()
            assert resp.status == 503, raw
            assert resp.headers["Retry-After"].isdigit()
            assert "SELECT" not in raw and "Traceback" not in raw
    finally:
        await store.connections.home_engine.dispose()
        await store.connections.home_reads.close()
        store.connections.home_engine, store.connections.home_reads = live, live_reads
    resp = await client.post(URL, json=QUESTION)
    assert resp.status == 200
