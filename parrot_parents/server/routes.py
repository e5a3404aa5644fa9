"""Handlers of the HTTP service. They parse, call the bots, and format; no logic of their own.

See :mod:`parrot_parents.server.openapi` (served at ``/openapi.json``) for the contract.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from parrot_parents.bots.chatbot import Chatbot
from parrot_parents.errors import BotConfigError, LLMNotConfiguredError, StoreError
from parrot_parents.server.catalog_routes import require_writes, state, unknown_collection
from parrot_parents.server.middleware import BOT_NOT_LOADED, json_error, json_response
from parrot_parents.server.schemas import (
    AskRequest,
    ContextRequest,
    ErrorAnswer,
    path_document_id,
    query_flag,
    read_body,
    read_object,
)
from parrot_parents.server.state import REQUEST_ID
from parrot_parents.stores.protocols import DocumentRows, ScopeCheck

__all__ = ["routes"]

logger = logging.getLogger("parrot_parents.server")
routes = web.RouteTableDef()


async def _refresh(request: web.Request) -> None:
    """Pick up changed bot rows (cheap when nothing changed); keep serving on failure."""
    if not state(request).auto_reload:
        return
    try:
        await state(request).manager.refresh()
    except (StoreError, SQLAlchemyError) as exc:
        logger.warning("[%s] could not refresh the bots: %s", request[REQUEST_ID], exc)


def _public_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """``meta`` with fallback errors cut to their first line (at most 200 characters).

    Fallback errors come from :func:`~parrot_parents.retrieval.meta.describe_error`, which
    never carries SQL: a database error is its class names, or a ``StoreError`` message.
    """
    fallbacks = []
    for fallback in meta.get("fallbacks", []):
        error = str(fallback.get("error", ""))
        fallbacks.append({**fallback, "error": error.splitlines()[0][:200] if error else error})
    return {**meta, "fallbacks": fallbacks}


def _describe(bot: Chatbot) -> dict[str, Any]:
    settings = bot.settings
    data = settings.model_dump() if settings is not None else bot.config()
    return {**data, "status": "loaded"}


async def _lookup(request: web.Request) -> Chatbot:
    """The path's bot, after a refresh; a bot that failed to load is a 409.

    Not a 503: its cause (most often a collection not ingested yet) lasts until someone
    acts, so a client told to retry would retry for nothing.
    """
    await _refresh(request)
    name = request.match_info["name"]
    try:
        return state(request).manager.get(name)
    except BotConfigError:
        reason = state(request).manager.errors.get(name, "invalid configuration")
        raise ErrorAnswer(
            409,
            f"bot {name!r} is not available: it failed to load",
            details=[{"key": "", "message": reason}],
            hint="fix its row (`parrot-parents bots set`) or ingest its collection; it "
            "reloads on the next request",
            code=BOT_NOT_LOADED,
        ) from None


@routes.get("/health")
async def health(request: web.Request) -> web.Response:
    """Liveness, served without a token: whether the database answers within 5 seconds.

    ``{"status": "ok"}``, or 503 with ``{"status": "unavailable"}``. Nothing about the
    bots: their state is ``GET /api/v1/health``, behind the token.
    """
    if not await state(request).manager.database_ok():
        logger.warning("[%s] health: the database does not answer", request[REQUEST_ID])
        return json_response({"status": "unavailable"}, status=503)
    return json_response({"status": "ok"})


@routes.get("/api/v1/health")
async def bots_health(request: web.Request) -> web.Response:
    """Database and each bot's parent-searcher readiness; 503 when the database is down."""
    await _refresh(request)
    h = await state(request).manager.health()
    searchers_ok = all(b["parent_searcher"] is not False for b in h["bots"].values())
    if not h["database"]:
        status = "unavailable"
    elif searchers_ok and not h["failed"]:
        status = "ok"
    else:
        status = "degraded"
    body = {
        "status": status,
        "database": {"ok": h["database"]},
        "bots": h["bots"],
        "failed_bots": h["failed"],
    }
    return json_response(body, status=200 if h["database"] else 503)


@routes.get("/api/v1/bots")
async def list_bots(request: web.Request) -> web.Response:
    """The loaded bots, and the enabled rows that failed to load."""
    await _refresh(request)
    manager = state(request).manager
    bots = [_describe(b) for _, b in sorted(manager.bots.items())]
    failed = [
        {"name": n, "status": "failed", "error": reason}
        for n, reason in sorted(manager.errors.items())
    ]
    return json_response({"bots": bots + failed})


@routes.get("/api/v1/bots/{name}")
async def get_bot(request: web.Request) -> web.Response:
    """One bot's row (also when disabled or invalid) and its load status."""
    await _refresh(request)
    return await _bot_row(request, request.match_info["name"])


async def _bot_row(request: web.Request, name: str, status: int = 200) -> web.Response:
    manager = state(request).manager
    row = await manager.repository.get_row(name)
    row = {k: v for k, v in row.items() if k != "id"}
    if name in manager.bots:
        row["status"] = "loaded"
    elif name in manager.errors:
        row.update(status="failed", error=manager.errors[name])
    else:
        row["status"] = "disabled"
    return json_response(row, status=status)


def _require_bot_writes(request: web.Request) -> str:
    """The path's bot name, once writes are allowed (else a 403)."""
    require_writes(request, "bot", "`parrot-parents bots`")
    return request.match_info["name"]


async def _after_write(request: web.Request, name: str, status: int) -> web.Response:
    """Load the change at once, then answer with the row and its load status."""
    await state(request).manager.refresh()
    if status == 204:
        return web.Response(status=204)
    return await _bot_row(request, name, status)


@routes.put("/api/v1/bots/{name}")
async def put_bot(request: web.Request) -> web.Response:
    """Create the bot, or replace all its settings (absent keys take their defaults)."""
    name = _require_bot_writes(request)
    force = query_flag(request, "force")
    data = await read_object(request)
    await unknown_collection(request, data, force=force)
    _, created = await state(request).manager.repository.put(name, data)
    return await _after_write(request, name, 201 if created else 200)


@routes.patch("/api/v1/bots/{name}")
async def patch_bot(request: web.Request) -> web.Response:
    """Change some settings, e.g. ``{"expand_to_parent": true}``; validated as a whole."""
    name = _require_bot_writes(request)
    force = query_flag(request, "force")
    changes = await read_object(request)
    await unknown_collection(request, changes, force=force)
    settings = await state(request).manager.repository.update(name, changes)
    return await _after_write(request, settings.name, 200)


@routes.delete("/api/v1/bots/{name}")
async def delete_bot(request: web.Request) -> web.Response:
    """Remove the bot's row."""
    name = _require_bot_writes(request)
    await state(request).manager.repository.delete(name)
    return await _after_write(request, name, 204)


@routes.post("/api/v1/reload")
async def reload(request: web.Request) -> web.Response:
    """Rebuild every bot from its row now."""
    report = await state(request).manager.reload()
    return json_response(
        {"loaded": report.loaded, "failed": report.failed, "removed": report.removed}
    )


@routes.post("/api/v1/bots/{name}/context")
async def context(request: web.Request) -> web.Response:
    """The passages a bot retrieves for a question, with ``meta``."""
    bot = await _lookup(request)
    body = await read_body(request, ContextRequest)
    retrieval = await bot.retrieve(body.question, body.options())
    return json_response(
        {
            "bot": bot.name,
            "context": retrieval.context,
            "passages": [p.to_dict() for p in retrieval.passages],
            "meta": _public_meta(retrieval.meta.to_dict()),
        }
    )


@routes.get("/api/v1/bots/{name}/documents/{document_id:.+}")
async def document_rows(request: web.Request) -> web.Response:
    """One document's stored hierarchy: its rows (no text), parents first, with counts.
    A scoped bot lists the rows its ``/context`` could return: those in its scope, less
    the parents holding a child outside it."""
    bot = await _lookup(request)
    document_id = path_document_id(request)
    store = bot.store
    if not isinstance(store, DocumentRows):
        return json_error(
            501, "this bot's store cannot list the rows of a document", request=request
        )
    rows = await store.document_rows(document_id)
    if bot.scope is not None:
        # A scoped bot shows only the rows its searches could return.
        if not isinstance(store, ScopeCheck):
            return json_error(
                501, "this bot's store cannot check rows against its scope", request=request
            )
        kept = await store.ids_matching([r.id for r in rows], bot.scope)
        # A parent's text holds its children's: one holding a child outside the scope
        # is held back by /context, and so left out here (as expansion does).
        holding = {r.parent_document_id for r in rows if r.id not in kept}
        rows = [r for r in rows if r.id in kept and r.id not in holding]
    collection = bot.collection
    if not rows:
        return json_error(
            404,
            f"no rows of document {document_id!r} in collection {collection!r}",
            request=request,
            hint="document ids are the 'document_id' of the passages (/context)",
        )
    counts = {k: sum(r.kind == k for r in rows) for k in ("parent", "parent_chunk", "child")}
    return json_response(
        {
            "bot": bot.name,
            "collection": collection,
            "document_id": document_id,
            "counts": counts,
            "rows": [r.to_dict() for r in rows],
        }
    )


@routes.post("/api/v1/bots/{name}/ask")
async def ask(request: web.Request) -> web.Response:
    """The LLM's answer from the bot's passages; 501 when no LLM is configured."""
    llm = state(request).llm
    if llm is None:
        raise LLMNotConfiguredError(
            "no LLM is configured on this server",
            hint="set PARROT_PARENTS_LLM_BASE_URL and PARROT_PARENTS_LLM_MODEL before "
            "`parrot-parents serve`, or use /context",
        )
    bot = await _lookup(request)
    body = await read_body(request, AskRequest)
    answer = await bot.ask(body.question, body.options(), llm=llm, max_tokens=body.max_tokens)
    data = answer.to_dict()
    data["meta"] = _public_meta(data["meta"])
    return json_response({"bot": bot.name, **data})
