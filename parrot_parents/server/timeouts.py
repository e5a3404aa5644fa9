"""Read deadlines of the HTTP service: for a request's headers and for its body.

Headers: aiohttp's ``keepalive_timeout`` (set in :func:`make_runner`) also cuts a half-sent
head in the releases that arm it when the connection opens (3.14.5 does); behind a proxy,
set the proxy's own. Body: aiohttp reads it without a deadline, so :func:`read_bytes` gives
the read one: late bodies get a 408 and the connection closes after at most
:data:`LINGERING_S` seconds of draining (docs/service.md, "Serve").
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from parrot_parents.server.limits import DEFAULT_HEADER_TIMEOUT_S
from parrot_parents.server.state import STATE

__all__ = ["LINGERING_S", "make_runner", "read_bytes"]

#: Seconds aiohttp keeps reading (and discarding) a body it answered before reading it
#: all (a 408 or 413), before it closes the connection; aiohttp's default is 10.
LINGERING_S = 2.0


def make_runner(
    app: web.Application, *, header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S, **kwargs: Any
) -> web.AppRunner:
    """The ``AppRunner`` of ``app`` with ``header_timeout_s`` (seconds, > 0) as aiohttp's
    ``keepalive_timeout``: an idle connection, or one whose request head is not complete
    (see the module docstring), is closed after that long; and :data:`LINGERING_S` as its
    ``lingering_time``. Its protocol-level errors are JSON
    (:class:`~parrot_parents.server.protocol.JsonErrorsRunner`). ``kwargs`` go to
    ``AppRunner``.

    Raises:
        ValueError: ``header_timeout_s`` is not a positive number.
    """
    if isinstance(header_timeout_s, bool) or not header_timeout_s > 0:
        raise ValueError(f"header_timeout_s must be > 0, got {header_timeout_s!r}")
    # Imported here: the protocol module answers with the middleware's errors, whose
    # request bodies are read with this module's read_bytes.
    from parrot_parents.server.protocol import JsonErrorsRunner

    kwargs = {"keepalive_timeout": float(header_timeout_s), "lingering_time": LINGERING_S, **kwargs}
    return JsonErrorsRunner(app, **kwargs)


async def read_bytes(request: web.Request) -> bytes:
    """The request's body, read within the application's body timeout (the
    ``body_timeout_s`` of :func:`~parrot_parents.server.app.create_app`).

    Raises:
        web.HTTPRequestTimeout: the body was not all received in time (a 408; the error
            middleware closes the connection after answering).
    """
    seconds = request.app[STATE].body_timeout_s
    try:
        async with asyncio.timeout(seconds):
            return await request.read()
    except TimeoutError:
        raise web.HTTPRequestTimeout(
            reason=f"the body was not received within {seconds:g} seconds"
        ) from None
