"""The inspector's server side: static files at /ui and the document route."""

from __future__ import annotations

from parrot_parents.server.ui import STATIC_DIR
from tests.server.conftest import AUTH, TOKEN, MakeClient

QUESTION = {"question": "When are salaries paid?"}


async def test_the_page_and_its_files_are_served_without_a_token(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    resp = await client.get("/ui", allow_redirects=False)
    assert resp.status == 308 and resp.headers["Location"] == "/ui/"
    resp = await client.get("/ui/")
    assert resp.status == 200 and resp.content_type == "text/html"
    page = await resp.text()
    assert "/ui/inspector.js" in page and "/ui/inspector.css" in page
    assert "http://" not in page and "https://" not in page  # no CDN: works offline
    assert "default-src 'self'" in resp.headers["Content-Security-Policy"]
    for name, kind in (("inspector.js", "javascript"), ("inspector.css", "text/css")):
        resp = await client.get(f"/ui/{name}")
        assert resp.status == 200 and kind in resp.content_type
        assert await resp.text() == (STATIC_DIR / name).read_text(encoding="utf-8")


async def test_no_data_route_is_public(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    for path in ("/ui/../api/v1/bots", "/ui/%2e%2e/api/v1/bots", "/ui/missing.js", "/ui/.hidden"):
        resp = await client.get(path)
        assert resp.status in (401, 404), path
        assert "bots" not in (await resp.text()) or resp.status == 401
    assert (await client.get("/api/v1/bots/hr/documents/pay")).status == 401
    assert (await client.post("/ui/", json=QUESTION)).status == 405


async def test_meta_children_carry_their_offsets(make_client: MakeClient) -> None:
    client = await make_client()
    body = await (await client.post("/api/v1/bots/hr/context", json=QUESTION)).json()
    for child in body["meta"]["children"]:
        passage = next(p for p in body["passages"] if p["id"] == child["id"])
        assert (child["document_id"], child["start_index"], child["end_index"]) == (
            passage["document_id"],
            passage["start_index"],
            passage["end_index"],
        )


async def test_document_rows_of_a_bot(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    resp = await client.get("/api/v1/bots/hr/documents/pay", headers=AUTH)
    body = await resp.json()
    assert resp.status == 200, body
    assert body["document_id"] == "pay" and body["collection"] == "handbook"
    assert body["counts"] == {"parent": 1, "parent_chunk": 0, "child": 3}
    assert [(r["id"], r["kind"], r["parent_document_id"]) for r in body["rows"]] == [
        ("pay", "parent", None),
        ("pay#0", "child", "pay"),
        ("pay#1", "child", "pay"),
        ("pay#2", "child", "pay"),
    ]
    first = body["rows"][1]
    assert first["start_index"] == 0 and first["length"] == first["end_index"] == 83
    assert "text" not in first and "document" not in first


async def test_document_route_errors(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    resp = await client.get("/api/v1/bots/hr/documents/nope", headers=AUTH)
    assert resp.status == 404 and "nope" in (await resp.json())["error"]
    resp = await client.get("/api/v1/bots/ghost/documents/pay", headers=AUTH)
    assert resp.status == 404
    resp = await client.get("/api/v1/bots/broken/documents/pay", headers=AUTH)
    assert resp.status == 409
    resp = await client.get("/api/v1/bots/hr/documents/" + "x" * 1025, headers=AUTH)
    assert resp.status == 400
