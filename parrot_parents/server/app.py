"""The aiohttp application of ``parrot-parents serve``.

The endpoints, and which need a token: docs/service.md and ``/openapi.json``.
"""

from __future__ import annotations

from aiohttp import web

from parrot_parents.bots.manager import BotManager
from parrot_parents.llm.client import ChatCompletionsClient
from parrot_parents.server.catalog_routes import catalog_routes
from parrot_parents.server.limits import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_MAX_BODY_BYTES,
    TOKEN_ENV,
    check_settings,
)
from parrot_parents.server.middleware import auth_middleware, error_middleware
from parrot_parents.server.openapi import openapi_routes
from parrot_parents.server.routes import routes
from parrot_parents.server.state import STATE, ServerState
from parrot_parents.server.ui import add_ui_routes

__all__ = ["DEFAULT_MAX_BODY_BYTES", "TOKEN_ENV", "create_app"]


def create_app(
    manager: BotManager,
    *,
    token: str | None = None,
    llm: ChatCompletionsClient | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    auto_reload: bool = True,
    close_on_cleanup: bool = False,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
) -> web.Application:
    """Build the application around a loaded :class:`BotManager`.

    Args:
        manager: the bots (call ``await manager.load()`` first, or let the first request's
            refresh load them).
        token: bearer token required on every route but ``/health``; None: no auth, and
            bot writes over HTTP are refused (403).
        llm: the chat-completions client of ``/ask``; None: ``/ask`` answers 501.
        max_body_bytes: request body limit (bytes), default 64 KiB; larger bodies get 413.
        auto_reload: before each request, reload the bot rows that changed (one small
            query), so a row edited with ``parrot-parents bots set`` applies at once.
        close_on_cleanup: close the manager and the LLM client when the app shuts down.
        body_timeout_s: seconds a request may take to send its whole body, default 30;
            past it the answer is 408 and the connection is closed. The deadline for the
            request head is the runner's (:func:`~parrot_parents.server.protocol.make_runner`).

    Raises:
        ConfigurationError: an empty token, a non-positive body limit or body timeout.
    """
    check_settings(token=token, max_body_bytes=max_body_bytes, body_timeout_s=body_timeout_s)
    app = web.Application(
        middlewares=[error_middleware, auth_middleware(token)],
        client_max_size=max_body_bytes,
    )
    app[STATE] = ServerState(
        manager=manager,
        llm=llm,
        writes_enabled=token is not None,
        max_body_bytes=max_body_bytes,
        auto_reload=auto_reload,
        body_timeout_s=float(body_timeout_s),
    )
    app.add_routes(routes)
    app.add_routes(catalog_routes)
    app.add_routes(openapi_routes)
    add_ui_routes(app)

    async def cleanup(app: web.Application) -> None:
        if close_on_cleanup:
            state = app[STATE]
            if state.llm is not None:
                await state.llm.close()
            await state.manager.close()

    app.on_cleanup.append(cleanup)
    return app
