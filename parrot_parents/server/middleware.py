"""Middlewares of the HTTP service: bearer-token auth, and errors as JSON.

Every error answer is ``{"error": message, "details": [...], "request_id": id}``, with a
``code`` where the status alone does not say what to do (:data:`COLLECTION_MISSING`,
:data:`BOT_NOT_LOADED`). The message is written for the client; SQL text, driver messages
and tracebacks only go to the server's log (under the same ``request_id``).
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from aiohttp import web
from sqlalchemy.exc import SQLAlchemyError

from parrot_parents.errors import (
    BotConfigError,
    BotNotFoundError,
    CollectionNotFoundError,
    ConfigurationError,
    LLMError,
    LLMNotConfiguredError,
    SchemaMismatchError,
    StoreError,
)
from parrot_parents.server.schemas import ErrorAnswer
from parrot_parents.server.state import REQUEST_ID, STATE

if TYPE_CHECKING:
    from aiohttp.typedefs import Middleware

__all__ = [
    "BOT_NOT_LOADED",
    "COLLECTION_MISSING",
    "PUBLIC_PATHS",
    "auth_middleware",
    "error_middleware",
    "is_public",
    "json_error",
    "json_response",
]

logger = logging.getLogger("parrot_parents.server")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_SAFE_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")

#: ``code`` of a 409: the collection a bot reads, or a bot write names, does not exist.
#: It lasts until someone ingests into it (or fixes the row): retrying does not help.
COLLECTION_MISSING = "collection_missing"
#: ``code`` of a 409: the bot's row is stored but the bot did not load (the details say
#: why: a missing collection, an invalid setting); it lasts until the cause is fixed.
BOT_NOT_LOADED = "bot_not_loaded"

#: Paths served without a token.
PUBLIC_PATHS = frozenset({"/health"})
#: The inspector page's static files (HTML, CSS, script; no data) are served without a
#: token: the page asks for the token and sends it with each API call.
PUBLIC_PREFIXES = ("/ui/",)
UI_PATH = "/ui"


def is_public(path: str) -> bool:
    """True for the paths served without a token: /health and the inspector's files."""
    return path in PUBLIC_PATHS or path == UI_PATH or path.startswith(PUBLIC_PREFIXES)


def _default(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else str(value)


_dumps = partial(json.dumps, ensure_ascii=False, default=_default)


def json_response(data: Any, status: int = 200) -> web.Response:
    """A JSON response (non-JSON values such as datetimes become strings)."""
    return web.json_response(data, status=status, dumps=_dumps)


def json_error(
    status: int,
    message: str,
    *,
    request: web.Request | None = None,
    details: list[dict[str, str]] | None = None,
    hint: str | None = None,
    headers: dict[str, str] | None = None,
    code: str | None = None,
) -> web.Response:
    """The error body shared by every failure."""
    body: dict[str, Any] = {"error": message}
    if code:
        body["code"] = code
    if hint:
        body["hint"] = hint
    if details:
        body["details"] = details
    if request is not None and REQUEST_ID in request:
        body["request_id"] = request[REQUEST_ID]
    resp = json_response(body, status=status)
    if headers:
        resp.headers.update(headers)
    return resp


#: Seconds a client should wait before retrying after a 503 from the database.
RETRY_AFTER_S = 5


def _database_error(request: web.Request, exc: BaseException) -> web.Response:
    """503 with ``Retry-After`` for an outage; 400 when the database refused a value.

    Decided by SQLSTATE (class 22, data exception: a client value the database cannot
    store), never by message text. Details go to the log only.
    """
    from parrot_parents.stores.postgres.connections.engine import store_error

    err = store_error(exc, f"{request.method} {request.path}")
    if err.sqlstate is not None and err.sqlstate.startswith("22") and not err.unavailable:
        logger.warning("[%s] value refused by the database: %s", request[REQUEST_ID], err)
        return json_error(
            400, "a value in the request cannot be stored or compared", request=request
        )
    if err.unavailable:
        logger.warning("[%s] database unavailable: %s", request[REQUEST_ID], err)
    else:
        logger.error("[%s] database failure: %s", request[REQUEST_ID], err, exc_info=exc)
    return json_error(
        503,
        "the database is unavailable",
        request=request,
        hint=f"retry in {RETRY_AFTER_S} seconds",
        headers={"Retry-After": str(RETRY_AFTER_S)},
    )


def auth_middleware(token: str | None) -> Middleware:
    """Require ``Authorization: Bearer <token>`` on every path but :data:`PUBLIC_PATHS`.

    With ``token=None`` every request passes. The comparison is constant-time.
    """
    expected = None if token is None else token.encode()

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if expected is None or is_public(request.path):
            return await handler(request)
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), expected):
            return json_error(
                401,
                "missing or wrong bearer token",
                request=request,
                hint="send the header 'Authorization: Bearer <token>'",
                headers={"WWW-Authenticate": 'Bearer realm="parrot-parents"'},
            )
        return await handler(request)

    return middleware


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Map exceptions to JSON errors; log unexpected ones with their traceback."""
    given = request.headers.get("X-Request-Id", "")
    request[REQUEST_ID] = given if _SAFE_ID.match(given) else uuid.uuid4().hex[:16]
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        message = exc.reason
        if exc.status == 413:
            message = (
                f"the body is larger than the limit of {request.app[STATE].max_body_bytes} bytes"
            )
        hint = None
        if exc.status == 405 and "Allow" in exc.headers:
            hint = f"this path answers {exc.headers['Allow']}, not {request.method}"
        response = json_error(exc.status, message, request=request, hint=hint)
        if exc.status == 405 and "Allow" in exc.headers:
            response.headers["Allow"] = exc.headers["Allow"]
        if exc.status == 408:
            # The rest of a late body is not waited for: the connection ends here.
            response.force_close()
    except ErrorAnswer as exc:
        response = json_error(
            exc.status,
            exc.message,
            request=request,
            details=exc.details,
            hint=exc.hint,
            code=exc.code,
        )
    except BotNotFoundError as exc:
        # The names of other bots are not the answer to a question about this one: the
        # list has its own path.
        hint = "GET /api/v1/bots lists the bots this service serves"
        response = json_error(404, exc.message, request=request, hint=hint)
    except BotConfigError as exc:
        details = [{"key": k, "message": m} for k, m in exc.problems]
        response = json_error(400, exc.message, request=request, details=details, hint=exc.hint)
    except LLMNotConfiguredError as exc:
        response = json_error(501, exc.message, request=request, hint=exc.hint)
    except LLMError as exc:
        logger.warning("[%s] LLM failure: %s", request[REQUEST_ID], exc)
        status = "" if exc.status is None else f" (HTTP {exc.status})"
        response = json_error(502, f"the LLM request failed{status}", request=request)
    except ConfigurationError as exc:
        response = json_error(400, exc.message, request=request, hint=exc.hint)
    except CollectionNotFoundError as exc:
        # The database is up: a collection the bot reads was dropped. Not a 503: that
        # has clients retry, and this lasts until someone ingests into it again.
        logger.warning("[%s] %s", request[REQUEST_ID], exc)
        response = json_error(
            409, exc.message, request=request, hint=exc.hint, code=COLLECTION_MISSING
        )
    except SchemaMismatchError as exc:
        # The bot's collection and the server disagree (another embedding model, a re-embed
        # under way): not the client's fault, and not a crash: the service cannot answer.
        response = json_error(503, exc.message, request=request, hint=exc.hint)
    except (StoreError, SQLAlchemyError, OSError) as exc:
        response = _database_error(request, exc)
    except Exception:
        logger.exception(
            "[%s] unhandled error on %s %s", request[REQUEST_ID], request.method, request.path
        )
        response = json_error(500, "internal error", request=request)
    response.headers["X-Request-Id"] = request[REQUEST_ID]
    return response
