"""The optional bearer token protects every route but /health."""

from __future__ import annotations

import pytest

from parrot_parents.errors import ConfigurationError
from parrot_parents.server.app import create_app
from tests.server.conftest import AUTH, TOKEN, MakeClient

PROTECTED = [
    ("GET", "/api/v1/bots"),
    ("GET", "/api/v1/bots/hr"),
    ("POST", "/api/v1/bots/hr/context"),
    ("POST", "/api/v1/bots/hr/ask"),
    ("POST", "/api/v1/reload"),
    ("PATCH", "/api/v1/bots/hr"),
    ("GET", "/openapi.json"),
]


@pytest.mark.parametrize(("method", "path"), PROTECTED)
@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {TOKEN}"},
        {"Authorization": TOKEN},
        {"Authorization": f"Bearer {TOKEN}x"},
    ],
)
async def test_missing_or_wrong_token_is_401(
    make_client: MakeClient, method: str, path: str, headers: dict[str, str]
) -> None:
    client = await make_client(token=TOKEN)
    resp = await client.request(method, path, json={"question": "x"}, headers=headers)
    assert resp.status == 401
    assert resp.headers["WWW-Authenticate"].startswith("Bearer")
    assert (await resp.json())["error"] == "missing or wrong bearer token"


async def test_the_right_token_passes(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    assert (await client.get("/api/v1/bots", headers=AUTH)).status == 200
    lower = {"Authorization": f"bearer {TOKEN}"}
    resp = await client.post("/api/v1/bots/hr/context", json={"question": "pay"}, headers=lower)
    assert resp.status == 200


async def test_health_needs_no_token(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    assert (await client.get("/health")).status == 200


async def test_without_a_token_everything_is_open(make_client: MakeClient) -> None:
    client = await make_client()
    assert (await client.get("/api/v1/bots")).status == 200


async def test_the_token_is_checked_before_the_body_is_read(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN, max_body_bytes=100)
    resp = await client.post("/api/v1/bots/hr/context", data=b"x" * 10_000)
    assert resp.status == 401


def test_an_empty_token_is_refused(manager: object) -> None:
    with pytest.raises(ConfigurationError, match="the bearer token must not be empty"):
        create_app(manager, token=" ")  # type: ignore[arg-type]
