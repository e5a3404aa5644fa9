"""The service's settings that the CLI shows in ``--help`` (a light module: no aiohttp)."""

from __future__ import annotations

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "TOKEN_ENV",
]

#: Environment variable holding the bearer token of ``parrot-parents serve``.
TOKEN_ENV = "PARROT_PARENTS_TOKEN"
#: Default request body limit: 64 KiB.
DEFAULT_MAX_BODY_BYTES = 64 * 1024
#: Seconds a connection may take to send a complete request head (and may sit idle
#: between requests): aiohttp's ``keepalive_timeout`` (:mod:`parrot_parents.server.timeouts`).
DEFAULT_HEADER_TIMEOUT_S = 15.0
#: Seconds a request may take to send its whole body.
DEFAULT_BODY_TIMEOUT_S = 30.0
