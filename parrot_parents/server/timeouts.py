"""Read deadlines of the HTTP service: for a request's headers and for its body.

Headers: aiohttp's ``keepalive_timeout`` (set in
:func:`~parrot_parents.server.protocol.make_runner`) also cuts a half-sent
head in the releases that arm it when the connection opens (3.14.5 does); behind a proxy,
set the proxy's own. Body: aiohttp reads it without a deadline, so :func:`read_bytes` gives
the read one: late bodies get a 408 and the connection closes after at most
:data:`LINGERING_S` seconds of draining (docs/service.md, "Serve").
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from parrot_parents.server.state import STATE

__all__ = ["LINGERING_S", "read_bytes"]

#: Seconds aiohttp keeps reading (and discarding) a body it answered before reading it
#: all (a 408 or 413), before it closes the connection; aiohttp's default is 10.
LINGERING_S = 2.0


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
