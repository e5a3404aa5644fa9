"""The service's settings that the CLI shows in ``--help`` (a light module: no aiohttp)."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_BODY_BYTES", "TOKEN_ENV"]

#: Environment variable holding the bearer token of ``parrot-parents serve``.
TOKEN_ENV = "PARROT_PARENTS_TOKEN"
#: Default request body limit: 64 KiB.
DEFAULT_MAX_BODY_BYTES = 64 * 1024
