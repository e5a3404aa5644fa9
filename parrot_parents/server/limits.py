"""The service's settings that the CLI shows in ``--help`` (a light module: no aiohttp)."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping

from parrot_parents.errors import ConfigurationError

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_HEADER_TIMEOUT_S",
    "DEFAULT_MAX_BODY_BYTES",
    "INSECURE_FLAG",
    "TOKEN_ENV",
    "check_exposure",
    "check_settings",
    "is_loopback",
]

#: Environment variable holding the bearer token of ``parrot-parents serve``.
TOKEN_ENV = "PARROT_PARENTS_TOKEN"
#: The ``serve`` flag that allows a non-loopback address without a token.
INSECURE_FLAG = "--insecure-no-token-on-public-interface"
#: What a server without a token opens to whoever reaches its address.
EXPOSED = (
    "every document's text (/context, /documents), the bots' settings and /api/v1/reload "
    "would answer anyone on the network"
)
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


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address to bind) is reachable from this machine only:
    ``localhost`` or a loopback address (``127.0.0.0/8``, ``::1``). Any other name or
    address, ``0.0.0.0`` and ``::`` included, is taken as reachable from the network."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(*, host: str, token: str | None, insecure: bool) -> str | None:
    """Refuse to serve a non-loopback ``host`` without a token, unless ``insecure``.

    Returns:
        None on a loopback address or with a token; the warning to log when ``insecure``
        lets a non-loopback address go without one.

    Raises:
        ConfigurationError: a non-loopback ``host``, no token and not ``insecure``; the
            message says what would be open and the hint how to close it.
    """
    if token is not None or is_loopback(host):
        return None
    if insecure:
        return f"serving {host} without a token ({INSECURE_FLAG}): {EXPOSED}"
    raise ConfigurationError(
        f"refusing to serve --host {host} without a token: {EXPOSED}",
        hint=f"set --token (or ${TOKEN_ENV}), bind 127.0.0.1, or pass {INSECURE_FLAG}",
    )
