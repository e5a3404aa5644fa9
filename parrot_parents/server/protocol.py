"""The errors aiohttp answers before the application sees a request, as JSON.

A request line longer than aiohttp's ``max_line_size`` (8190 bytes by default: a long
percent-encoded document id), a header over ``max_field_size``, or bytes that are not HTTP
are answered by aiohttp's protocol handler itself, in plain text, before any middleware
runs. :class:`JsonErrorsRunner` answers them in the service's JSON error format
(:func:`~parrot_parents.server.middleware.json_error`), so that a client parses every
error the same way.
"""

from __future__ import annotations

import logging
import uuid
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import LineTooLong
from aiohttp.web_protocol import RequestHandler

from parrot_parents.server.limits import DEFAULT_HEADER_TIMEOUT_S
from parrot_parents.server.middleware import json_error
from parrot_parents.server.timeouts import LINGERING_S

__all__ = ["JsonErrorsRunner", "make_runner"]

logger = logging.getLogger("parrot_parents.server")


class _JsonErrorsHandler(RequestHandler):
    """aiohttp's protocol handler with its own error answers in JSON."""

    # The instances are aiohttp's, given this class (see _JsonErrorsServer): no new slots.
    __slots__ = ()

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        # aiohttp's own answer first: it logs, and raises when an answer was already sent.
        super().handle_error(request, status, exc, message)
        request_id = uuid.uuid4().hex[:16]
        limit = max(self.max_line_size, self.max_field_size)
        hint = None
        # aiohttp's messages quote the bytes received: they go to the log, not the client.
        if status >= 500:
            text = "internal error"
        elif isinstance(exc, LineTooLong):
            text = "the request line (the URL) or a header is too long"
            hint = (
                f"the limit is {limit} bytes each; send long document ids in a body "
                "(POST /api/v1/collections/{collection}/documents/delete)"
            )
        else:
            text = f"the request is not valid HTTP ({HTTPStatus(status).phrase})"
        logger.warning("[%s] request refused by the HTTP parser: %s", request_id, text)
        response = json_error(status, text, hint=hint)
        response.headers["X-Request-Id"] = request_id
        # As aiohttp does: what follows a request it could not read cannot be trusted.
        response.force_close()
        return response


class _JsonErrorsServer(web.Server):
    """aiohttp's server, whose connections use :class:`_JsonErrorsHandler`."""

    def __call__(self) -> RequestHandler:
        handler = super().__call__()
        handler.__class__ = _JsonErrorsHandler
        return handler


class JsonErrorsRunner(web.AppRunner):
    """An ``AppRunner`` whose protocol-level errors (a request line or a header over
    aiohttp's limits, a request that is not HTTP) are JSON, like the application's."""

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = _JsonErrorsServer
        return server


def make_runner(
    app: web.Application, *, header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S, **kwargs: Any
) -> web.AppRunner:
    """The ``AppRunner`` of ``app`` with ``header_timeout_s`` (seconds, > 0) as aiohttp's
    ``keepalive_timeout``: an idle connection, or one whose request head is not complete
    (see the module docstring), is closed after that long; and :data:`LINGERING_S` as its
    ``lingering_time``. Its protocol-level errors are JSON
    (:class:`JsonErrorsRunner`). ``kwargs`` go to
    ``AppRunner``.

    Raises:
        ValueError: ``header_timeout_s`` is not a positive number.
    """
    if isinstance(header_timeout_s, bool) or not header_timeout_s > 0:
        raise ValueError(f"header_timeout_s must be > 0, got {header_timeout_s!r}")
    kwargs = {"keepalive_timeout": float(header_timeout_s), "lingering_time": LINGERING_S, **kwargs}
    return JsonErrorsRunner(app, **kwargs)
