"""``/api/v1/collections``, the liveness ``/health``, bot writes on unknown collections and
duplicate JSON keys, on a real running app and database."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from parrot_parents.bots.repository import BotRepository
from tests.server.conftest import AUTH, MakeClient

TOKEN = AUTH["Authorization"].split()[1]


async def test_health_without_a_token_says_only_up(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    resp = await client.get("/health")
    assert resp.status == 200
    assert await resp.json() == {"status": "ok"}
    assert (await client.get("/api/v1/health")).status == 401
    resp = await client.get("/api/v1/health", headers=AUTH)
    assert resp.status == 200
    assert await resp.json() == {
        "status": "degraded",
        "database": {"ok": True},
        "bots": {"hr": {"parent_searcher": True}, "hr_parents": {"parent_searcher": True}},
        "failed_bots": ["broken"],
    }


async def test_collections_and_documents_are_listed(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    assert (await client.get("/api/v1/collections")).status == 401
    resp = await client.get("/api/v1/collections", headers=AUTH)
    assert resp.status == 200
    body = await resp.json()
    # The fingerprint's digest is for people (its rounding may differ across CPUs).
    assert re.fullmatch(r"[0-9a-f]{12}", body["collections"][0].pop("model_fingerprint"))
    assert body == {
        "collections": [
            {
                "name": "handbook",
                "schema": "public",
                "children": 6,
                "parents": 2,
                "indexed": 0,
                "documents": 0,
                "dimension": 384,
                "embedding_model": "sentence-transformers/all-MiniLM-L6-v2",
                "reembedding": False,
                "strategies": ["plain"],
                "lexical_backend": "sql",
                "text_search_config": "english",
                "partition_key": None,
                "filter_keys": [],
            }
        ]
    }
    resp = await client.get("/api/v1/collections/handbook/documents", headers=AUTH)
    body = await resp.json()
    assert resp.status == 200, body
    assert body == {
        "collection": "handbook",
        "documents": [
            {
                "document_id": doc,
                "source": f"{doc}.md",
                "characters": None,
                "children": 3,
                "parents": 1,
                "ingested_at": None,
            }
            for doc in ("leave", "pay")
        ],
    }
    resp = await client.get("/api/v1/collections/bots/documents", headers=AUTH)
    assert resp.status == 404  # a table, not a collection
    assert (await resp.json())["error"] == "no collection named 'bots'"
    resp = await client.get("/api/v1/collections/no-such/documents", headers=AUTH)
    assert resp.status == 400


async def test_delete_documents_and_drop(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    base = "/api/v1/collections/handbook"
    resp = await client.post(
        f"{base}/documents/delete", json={"document_ids": ["pay", "nope"]}, headers=AUTH
    )
    assert resp.status == 200
    assert await resp.json() == {
        "collection": "handbook",
        "deleted": {"pay": 4},
        "unknown": ["nope"],
    }
    resp = await client.post(f"{base}/documents/delete", json={"document_ids": []}, headers=AUTH)
    assert resp.status == 400
    assert (await client.delete(f"{base}/documents/leave", headers=AUTH)).status == 204
    resp = await client.delete(f"{base}/documents/leave", headers=AUTH)
    assert resp.status == 404
    assert (await resp.json())["error"] == "no document 'leave' in collection 'handbook'"

    assert (await client.delete(base, headers=AUTH)).status == 204
    assert (await client.delete(base, headers=AUTH)).status == 404
    listing = await (await client.get("/api/v1/collections", headers=AUTH)).json()
    assert listing == {"collections": []}
    # The bots on it were reloaded at once: they report the missing collection.
    resp = await client.post("/api/v1/bots/hr/context", json={"question": "pay?"}, headers=AUTH)
    body = await resp.json()
    assert resp.status == 409, body
    assert body["error"] == "bot 'hr' is not available: it failed to load", body


async def test_a_collection_dropped_behind_the_services_back_is_a_409_naming_it(
    make_client: MakeClient, bots_dsn: str, embeddings: Any
) -> None:
    # Dropped by another process (the CLI): the bots keep their open stores. It was a 503
    # "the database is unavailable", retried by clients for nothing; it lasts until
    # someone ingests, as for a bot that could not load (409 too).
    from parrot_parents.stores.postgres import PgVectorStore

    client = await make_client(token=TOKEN)
    ask = {"question": "pay?"}
    resp = await client.post("/api/v1/bots/hr/context", json=ask, headers=AUTH)
    assert resp.status == 200
    other = PgVectorStore(dsn=bots_dsn, table="handbook", embedding=embeddings, create=False)
    await other.drop()
    await other.close()
    for path in ("/api/v1/bots/hr/context", "/api/v1/bots/hr_parents/context"):
        resp = await client.post(path, json=ask, headers=AUTH)
        body = await resp.json()
        assert resp.status == 409, body
        assert body["code"] == "collection_missing"
        assert "Retry-After" not in resp.headers
        assert "public.handbook" in body["error"] and "no longer exists" in body["error"], body


async def test_collection_writes_need_a_token(make_client: MakeClient) -> None:
    client = await make_client()
    assert (await client.get("/api/v1/collections")).status == 200
    resp = await client.delete("/api/v1/collections/handbook")
    assert resp.status == 403
    resp = await client.delete("/api/v1/collections/handbook/documents/pay")
    assert resp.status == 403
    resp = await client.post(
        "/api/v1/collections/handbook/documents/delete", json={"document_ids": ["pay"]}
    )
    assert resp.status == 403


async def test_bot_writes_refuse_an_unknown_collection_unless_forced(
    make_client: MakeClient, repo: BotRepository
) -> None:
    client = await make_client(token=TOKEN)
    resp = await client.put("/api/v1/bots/faq", json={"collection": "missing"}, headers=AUTH)
    body = await resp.json()
    assert resp.status == 409, body
    assert body["error"] == "collection 'missing' does not exist"
    assert body["details"] == [
        {"key": "collection", "message": "collection 'missing' does not exist"}
    ]
    resp = await client.patch("/api/v1/bots/hr", json={"collection": "missing"}, headers=AUTH)
    assert resp.status == 409
    assert (await repo.get_row("hr"))["collection"] == "handbook"
    resp = await client.put(
        "/api/v1/bots/faq?force=true", json={"collection": "missing"}, headers=AUTH
    )
    assert resp.status == 201
    assert (await resp.json())["status"] == "failed"


async def test_duplicate_json_keys_are_a_400(make_client: MakeClient) -> None:
    client = await make_client(token=TOKEN)
    for path, raw in (
        ("/api/v1/bots/hr/context", '{"question": "pay?", "limit": 1, "limit": 50}'),
        ("/api/v1/bots/hr", '{"description": "a", "nested": {"k": 1, "k": 2}}'),
    ):
        method = client.post if path.endswith("context") else client.patch
        resp = await method(path, data=raw, headers={**AUTH, "Content-Type": "application/json"})
        body = await resp.json()
        assert resp.status == 400, body
        assert body["error"].startswith("the body is not valid JSON: duplicate key "), body


async def test_a_bot_embedding_with_another_model_is_a_503_naming_both(
    aiohttp_client: Any, repo: BotRepository, bots_dsn: str, tmp_path: Path
) -> None:
    # The service's model is not the collection's: the client did nothing wrong, and the
    # server did not crash either. It was an unhandled 500 "internal error".
    from parrot_parents.bots.manager import BotManager
    from parrot_parents.embeddings.sentence_transformer import SentenceTransformerEmbeddings
    from parrot_parents.server.app import create_app
    from tests.stores.tiny_embedder import build_tiny_embedder

    other = SentenceTransformerEmbeddings(str(build_tiny_embedder(tmp_path)))
    manager = BotManager(bots_dsn, embedding=other)
    await manager.load()
    try:
        client = await aiohttp_client(create_app(manager, token=TOKEN))
        resp = await client.post("/api/v1/bots/hr/context", json={"question": "pay?"}, headers=AUTH)
        body = await resp.json()
        assert resp.status == 503, body
        assert "all-MiniLM-L6-v2" in body["error"] and str(tmp_path) in body["error"], body
    finally:
        await manager.close()


async def test_bot_writes_refuse_a_table_that_is_not_a_collection(
    make_client: MakeClient, repo: BotRepository
) -> None:
    client = await make_client(token=TOKEN)
    for table in ("bots", "parrot_parents_alembic_version"):
        resp = await client.patch("/api/v1/bots/hr", json={"collection": table}, headers=AUTH)
        body = await resp.json()
        assert resp.status == 409 and body["code"] == "collection_missing", body
    assert (await repo.get_row("hr"))["collection"] == "handbook"


async def test_every_id_the_store_takes_can_be_deleted_over_http(
    make_client: MakeClient, bots_dsn: str, embeddings: Any
) -> None:
    # Ids up to the store's 1024 bytes of UTF-8; the routes stopped at 1000 characters.
    from urllib.parse import quote

    from langchain_core.documents import Document

    from parrot_parents.stores.postgres import PgVectorStore

    long_id = "p" * 1009
    store = PgVectorStore(dsn=bots_dsn, table="handbook", embedding=embeddings)
    try:
        await store.add_documents(
            [
                Document("Long ids are kept.", metadata={"document_id": d})
                for d in (long_id, "q" * 1020)
            ]
        )
    finally:
        await store.close()
    client = await make_client(token=TOKEN)
    base = "/api/v1/collections/handbook/documents"
    resp = await client.delete(f"{base}/{quote(long_id, safe='')}", headers=AUTH)
    assert resp.status == 204, await resp.json()
    resp = await client.post(f"{base}/delete", json={"document_ids": ["q" * 1020]}, headers=AUTH)
    assert resp.status == 200, await resp.json()
    resp = await client.post(f"{base}/delete", json={"document_ids": ["é" * 513]}, headers=AUTH)
    assert resp.status == 400  # 1026 bytes
