"""The HTTP contract that schemathesis holds the service to, one fault at a time.

Each test names a way the service and its description disagreed: an answer its own schema
refused, an undocumented status, a body schema looser than the service, a query flag read
loosely, an error outside the JSON error format, a lasting state answered as an outage.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
import pytest
from aiohttp import web

from parrot_parents.bots.manager import BotManager
from parrot_parents.server.app import create_app
from parrot_parents.server.openapi import build_spec
from parrot_parents.server.protocol import make_runner
from parrot_parents.server.schemas import MAX_DOCUMENT_ID
from tests.server.conftest import AUTH, TOKEN, MakeClient

QUESTION = {"question": "When are salaries paid?"}


def _validator(component: str) -> jsonschema.Draft202012Validator:
    """A validator of the description's ``component`` schema (its refs resolved)."""
    spec = build_spec()
    schema = {"$ref": f"#/components/schemas/{component}", "components": spec["components"]}
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def _response_schema(path: str, method: str, status: str) -> dict[str, Any]:
    spec = build_spec()
    answer = spec["paths"][path][method]["responses"][status]
    return {**answer["content"]["application/json"]["schema"], "components": spec["components"]}


async def test_bot_answers_match_their_own_schemas(make_client: MakeClient) -> None:
    # Bot was allOf over BotSettings, whose additionalProperties: false refused status,
    # created_at and updated_at; a failed bot in the list had a shape of its own.
    client = await make_client(token=TOKEN)
    one = await (await client.get("/api/v1/bots/hr", headers=AUTH)).json()
    _validator("Bot").validate(one)
    assert {"status", "created_at", "updated_at"} <= set(one)
    listing = await (await client.get("/api/v1/bots", headers=AUTH)).json()
    failed = [b for b in listing["bots"] if b["status"] == "failed"]
    assert [b["name"] for b in failed] == ["broken"]
    jsonschema.validate(listing, _response_schema("/api/v1/bots", "get", "200"))
    broken = await (await client.get("/api/v1/bots/broken", headers=AUTH)).json()
    _validator("Bot").validate(broken)


def test_every_secured_operation_documents_401_and_400() -> None:
    # POST /api/v1/reload answered 401 with only 200 documented.
    for path, item in build_spec()["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            assert "400" in op["responses"], (method, path)
            if op["security"]:
                assert "401" in op["responses"], (method, path)
    reload = build_spec()["paths"]["/api/v1/reload"]["post"]["responses"]
    assert set(reload) == {"200", "400", "401", "503"}


def test_the_patch_body_schema_is_as_strict_as_the_service() -> None:
    # It was {"type": "object"}: unknown keys and NUL were refused by the service only.
    patch = _validator("BotPatch")
    assert not patch.is_valid({"bogus": 1})
    assert not patch.is_valid({"description": "a\x00b"})
    assert patch.is_valid({"description": "ab", "reranker_config.batch_size": 8})
    assert not _validator("BotWrite").is_valid({"collection": "c", "description": "\x00"})
    assert not _validator("ContextRequest").is_valid({"question": "pay\x00?"})
    # A blank question (Python's white space, \x1c included) is a 400 too.
    for blank in (" \t", "\x1c", "\u3000"):
        assert not _validator("AskRequest").is_valid({"question": blank})
    assert _validator("AskRequest").is_valid({"question": " pay? "})


def test_every_default_is_valid_for_its_own_schema() -> None:
    # expansion_mode, a string, had the object {"name": "parent", ...} as its default.
    schemas = build_spec()["components"]["schemas"]
    assert schemas["BotSettings"]["properties"]["expansion_mode"]["default"] == "parent"
    for name in ("BotSettings", "BotWrite", "ContextRequest", "AskRequest"):
        for key, prop in schemas[name]["properties"].items():
            if "default" in prop:
                assert jsonschema.Draft202012Validator(prop).is_valid(prop["default"]), (name, key)


@pytest.mark.parametrize("value", ["True", "1", "yes", "", "TRUE"])
async def test_force_takes_true_or_false_only(make_client: MakeClient, value: str) -> None:
    # ?force=True (what Python's requests sends for True) was read as false.
    client = await make_client(token=TOKEN)
    resp = await client.put(
        "/api/v1/bots/faq", params={"force": value}, json={"collection": "missing"}, headers=AUTH
    )
    body = await resp.json()
    assert resp.status == 400, body
    assert body["details"] == [
        {"key": "force", "message": f"must be true or false (lowercase), once; got {value!r}"}
    ]
    resp = await client.patch(
        "/api/v1/bots/hr?force=true&force=true", json={"description": "x"}, headers=AUTH
    )
    assert resp.status == 400


async def test_force_false_is_no_force(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    resp = await client.put(
        "/api/v1/bots/faq?force=false", json={"collection": "missing"}, headers=AUTH
    )
    assert resp.status == 409
    resp = await client.put(
        "/api/v1/bots/faq?force=true", json={"collection": "missing"}, headers=AUTH
    )
    assert resp.status == 201


def test_a_document_id_the_schema_takes_fits_the_service() -> None:
    # maxLength counts characters: 1,024 of 4-byte characters were valid by the schema,
    # and four times over the service's limit in bytes (and over the URL limit encoded).
    spec = build_spec()
    for path_schema in (
        spec["paths"]["/api/v1/bots/{name}/documents/{document_id}"]["parameters"][1]["schema"],
        spec["components"]["schemas"]["DeleteRequest"]["properties"]["document_ids"]["items"],
    ):
        assert path_schema["maxLength"] * 4 <= MAX_DOCUMENT_ID
        # Percent-encoded, the longest id fits aiohttp's request line of 8190 bytes.
        assert path_schema["maxLength"] * 4 * 3 < 8190 - 200


async def test_a_request_line_over_the_limit_is_a_json_error(manager: BotManager) -> None:
    # aiohttp's parser answered it in plain text, before any middleware.
    runner = make_runner(create_app(manager, token=TOKEN))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        long_id = "%F0%9F%A6%9C" * 1024
        for head in (
            f"GET /api/v1/bots/hr/documents/{long_id} HTTP/1.1\r\nHost: x\r\n",
            f"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: {'a' * 9000}\r\n",
        ):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"{head}\r\n".encode())
            await writer.drain()
            raw = (await reader.read()).decode()
            writer.close()
            head_part, _, body = raw.partition("\r\n\r\n")
            assert head_part.startswith("HTTP/1.1 400") or head_part.startswith("HTTP/1.0 400")
            assert "application/json" in head_part and "X-Request-Id" in head_part
            _validator("Error").validate(json.loads(body))
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    ("path", "method"),
    [
        ("/api/v1/bots/hr/context", "post"),
        ("/api/v1/bots/hr", "patch"),
        ("/api/v1/bots/faq", "put"),
        ("/api/v1/collections/handbook/documents/delete", "post"),
    ],
)
async def test_a_body_must_be_sent_as_json(make_client: MakeClient, path: str, method: str) -> None:
    # The body was read as JSON whatever its Content-Type.
    client = await make_client(token=TOKEN)
    data = '{"question": "pay?", "collection": "handbook", "document_ids": ["x"]}'
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        resp = await client.request(
            method, path, data=data, headers={**AUTH, "Content-Type": content_type}
        )
        body = await resp.json()
        assert resp.status == 415, body
        assert body["hint"] == "send the header 'Content-Type: application/json'"
    resp = await client.request(
        method,
        path,
        data=data,
        headers={**AUTH, "Content-Type": "application/json; charset=utf-8"},
    )
    assert resp.status != 415
    template = path.replace("hr", "{name}").replace("faq", "{name}")
    template = template.replace("handbook", "{collection}")
    assert "415" in build_spec()["paths"][template][method]["responses"]


async def test_a_missing_collection_is_a_409_not_an_outage(make_client: MakeClient) -> None:
    # A bot whose collection is missing was a 503: clients retried, though the state
    # lasts until someone ingests.
    client = await make_client(token=TOKEN)
    for resp in (
        await client.post("/api/v1/bots/broken/context", json=QUESTION, headers=AUTH),
        await client.get("/api/v1/bots/broken/documents/pay", headers=AUTH),
    ):
        body = await resp.json()
        assert resp.status == 409, body
        assert body["code"] == "bot_not_loaded" and "Retry-After" not in resp.headers
        _validator("Error").validate(body)
    resp = await client.put("/api/v1/bots/faq", json={"collection": "missing"}, headers=AUTH)
    body = await resp.json()
    assert resp.status == 409 and body["code"] == "collection_missing", body
