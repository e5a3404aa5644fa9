"""The service's settings that the CLI shows in ``--help`` (a light module: no aiohttp)."""

from __future__ import annotations

from collections.abc import Mapping

from parrot_parents.errors import ConfigurationError

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "TOKEN_ENV",
    "check_settings",
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


def check_settings(
    *,
    token: str | None,
    max_body_bytes: object,
    body_timeout_s: object,
    names: Mapping[str, str] | None = None,
) -> None:
    """Check the service's settings before anything starts.

    ``names``: how each setting (``token``, ``max_body_bytes``, ``body_timeout_s``) is
    called on the caller's surface (the CLI's flags), for the message.

    Raises:
        ConfigurationError: an empty token, a body limit that is not an int >= 1, or a
            body timeout that is not a number > 0.
    """
    named = {"token": "the bearer token", **(names or {})}
    if token is not None and not token.strip():
        raise ConfigurationError(f"{named['token']} must not be empty")
    if (
        isinstance(max_body_bytes, bool)
        or not isinstance(max_body_bytes, int)
        or max_body_bytes < 1
    ):
        name = named.get("max_body_bytes", "max_body_bytes")
        raise ConfigurationError(f"{name} must be an int >= 1, got {max_body_bytes!r}")
    if (
        isinstance(body_timeout_s, bool)
        or not isinstance(body_timeout_s, int | float)
        or not (body_timeout_s > 0)
    ):
        name = named.get("body_timeout_s", "body_timeout_s")
        raise ConfigurationError(f"{name} must be a number > 0, got {body_timeout_s!r}")
