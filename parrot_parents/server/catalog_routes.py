"""Handlers of ``/api/v1/collections``: list collections and documents, delete, drop.

Thin edges over :mod:`parrot_parents.stores.postgres.collections.catalog`; every route
needs the token, and the writes are refused on a server without one.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from aiohttp import web
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncEngine

from parrot_parents.bots.factory import collection_exists
from parrot_parents.errors import ConfigurationError
from parrot_parents.server.middleware import COLLECTION_MISSING, json_error, json_response
from parrot_parents.server.schemas import (
    MAX_DELETE_IDS,
    MAX_DOCUMENT_ID,
    BadRequest,
    DeleteRequest,
    ErrorAnswer,
    id_too_long,
    path_document_id,
    read_object,
)
from parrot_parents.server.state import STATE, ServerState
from parrot_parents.stores.identifiers import validate_identifier
from parrot_parents.stores.postgres.collections import catalog

__all__ = ["MAX_DELETE_IDS", "catalog_routes", "require_writes", "state", "unknown_collection"]

catalog_routes = web.RouteTableDef()


def state(request: web.Request) -> ServerState:
    """The application's :class:`ServerState`."""
    return request.app[STATE]


async def _engine(request: web.Request) -> AsyncEngine:
    engine: AsyncEngine = await state(request).manager.repository.engine()
    return engine


def require_writes(request: web.Request, what: str, commands: str) -> None:
    """Refuse a write on a server without a token.

    Raises:
        ErrorAnswer: 403 "{what} writes are disabled on a server without a token".
    """
    if not state(request).writes_enabled:
        raise ErrorAnswer(
            403,
            f"{what} writes are disabled on a server without a token",
            hint=f"start the server with --token (or PARROT_PARENTS_TOKEN), or use {commands}",
        )


def _require_collection_writes(request: web.Request) -> str:
    """The path's collection, once writes are allowed (else a 403)."""
    require_writes(request, "collection", "`parrot-parents delete` / `parrot-parents drop`")
    return request.match_info["collection"]


async def _require_collection(request: web.Request, collection: str) -> None:
    """Raises ErrorAnswer (404) when ``collection`` is not a collection of the database."""
    validate_identifier(collection, "collection")
    if collection not in await catalog.collection_names(await _engine(request)):
        raise ErrorAnswer(
            404,
            f"no collection named {collection!r}",
            hint="GET /api/v1/collections lists them; names are case-sensitive",
        )


async def unknown_collection(
    request: web.Request, data: dict[str, Any], *, force: bool = False
) -> None:
    """Refuse a bot write that names a collection that does not exist (the bot would not
    load), unless ``force`` (the query's ``force=true``). A value that is not a valid name
    is left to the row's validation.

    Raises:
        ErrorAnswer: 409 "collection ... does not exist", code ``collection_missing``: the
            body is well formed, the database lacks what it names.
    """
    collection = data.get("collection")
    if not isinstance(collection, str) or force:
        return
    try:
        validate_identifier(collection, "collection")
    except ConfigurationError:
        return
    if await collection_exists(await _engine(request), collection):
        return
    message = f"collection {collection!r} does not exist"
    raise ErrorAnswer(
        409,
        message,
        details=[{"key": "collection", "message": message}],
        hint="ingest into it first (GET /api/v1/collections lists them), or add "
        "?force=true to save the bot anyway: it will not load until the collection exists",
        code=COLLECTION_MISSING,
    )


def model_shown(name: str | None) -> str | None:
    """A model as an HTTP caller sees it: a sentence-transformers name as it is, a local
    model's absolute path as its folder's name (the server's paths stay local)."""
    if name is not None and PurePath(name).is_absolute():
        return PurePath(name).name
    return name


@catalog_routes.get("/api/v1/collections")
async def list_collections(request: web.Request) -> web.Response:
    """Every collection with its row counts, dimension, model, strategies, lexical backend
    (a local model by its folder's name, never its path)."""
    found = await catalog.list_collections(await _engine(request))
    shown = []
    for c in found:
        item = c.to_dict()
        item["embedding_model"] = model_shown(item.get("embedding_model"))
        shown.append(item)
    return json_response({"collections": shown})


@catalog_routes.get("/api/v1/collections/{collection}/documents")
async def list_documents(request: web.Request) -> web.Response:
    """A collection's documents: ids, sources, sizes (characters), row counts, times."""
    collection = request.match_info["collection"]
    await _require_collection(request, collection)
    found = await catalog.list_documents(await _engine(request), collection)
    return json_response({"collection": collection, "documents": [d.to_dict() for d in found]})


def _document_ids(data: dict[str, Any]) -> list[str]:
    """The ``document_ids`` of a delete body.

    Raises:
        BadRequest: other keys, or not a list of 1..MAX_DELETE_IDS non-empty strings.
    """
    try:
        ids = DeleteRequest.model_validate(data).document_ids
    except ValidationError as exc:
        extra = sorted(str(e["loc"][0]) for e in exc.errors() if e["type"] == "extra_forbidden")
        if extra:
            raise BadRequest(
                f"invalid body: {extra[0]}: unknown key",
                [{"key": k, "message": "unknown key"} for k in extra],
            ) from None
        ids = []
    if not ids or any(id_too_long(i) for i in ids):
        message = (
            f"must be a list of 1 to {MAX_DELETE_IDS} document ids "
            f"(non-empty strings of at most {MAX_DOCUMENT_ID} bytes of UTF-8)"
        )
        raise BadRequest(
            f"invalid body: document_ids: {message}",
            [{"key": "document_ids", "message": message}],
        )
    return ids


@catalog_routes.post("/api/v1/collections/{collection}/documents/delete")
async def delete_documents(request: web.Request) -> web.Response:
    """Delete documents (children, parents and documents-table rows) by id:
    ``{"document_ids": [...]}``; answers what was deleted (rows per id) and the ids that
    name no document."""
    collection = _require_collection_writes(request)
    ids = _document_ids(await read_object(request))
    await _require_collection(request, collection)
    report = await catalog.delete_documents(await _engine(request), collection, ids)
    return json_response({"collection": collection, **report.to_dict()})


@catalog_routes.delete("/api/v1/collections/{collection}/documents/{document_id:.+}")
async def delete_document(request: web.Request) -> web.Response:
    """Delete one document; 204, or 404 when no document has that id."""
    collection = _require_collection_writes(request)
    document_id = path_document_id(request)
    await _require_collection(request, collection)
    report = await catalog.delete_documents(await _engine(request), collection, [document_id])
    if report.unknown:
        return json_error(
            404,
            f"no document {document_id!r} in collection {collection!r}",
            request=request,
            hint=f"GET /api/v1/collections/{collection}/documents lists them",
        )
    return web.Response(status=204)


@catalog_routes.delete("/api/v1/collections/{collection}")
async def drop_collection(request: web.Request) -> web.Response:
    """Drop a collection and everything stored with it; 204. The bots on it are
    reloaded at once, so they report the missing collection instead of failing later."""
    collection = _require_collection_writes(request)
    await _require_collection(request, collection)
    await catalog.drop_collection(await _engine(request), collection)
    await state(request).manager.reload_collection(collection)
    return web.Response(status=204)
