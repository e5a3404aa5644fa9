"""A client of a running ``parrot-parents serve``, for ``ask --server URL``.

Standard library only (``urllib``): asking a warm server must not pay for importing the
model stack, nor for an HTTP library's import.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from parrot_parents.errors import ConfigurationError, ParrotParentsError

__all__ = ["DEFAULT_TIMEOUT_S", "ServerClient"]

#: Seconds a request to the server may take (the server's first search may warm caches).
DEFAULT_TIMEOUT_S = 120.0


class ServerClient:
    """Calls one server's ``/api/v1`` routes (see ``/openapi.json``).

    Args:
        url: the server's base URL, ``http://host:port`` (a path prefix is kept).
        token: bearer token of the server, or None when it runs without auth.
        timeout_s: seconds per request, default 120.

    Raises:
        ConfigurationError: a URL that is not ``http://`` or ``https://`` with a host.
    """

    def __init__(
        self, url: str, *, token: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ConfigurationError(
                f"--server must be an http:// or https:// URL, got {url!r}",
                hint="the address `parrot-parents serve` prints, e.g. http://127.0.0.1:8080",
            )
        self.url = url.rstrip("/")
        self.token = token
        self.timeout_s = timeout_s

    def _call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """The JSON answer of ``GET path`` (``POST`` with a body).

        Raises:
            ConfigurationError: the server refused the request (4xx); its message.
            ParrotParentsError: the server cannot be reached, or failed (5xx).
        """
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(self.url + path, data=data)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise _http_error(exc) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ParrotParentsError(
                f"cannot reach the server at {self.url}: {reason}",
                hint="start it with `parrot-parents serve`, or drop --server",
            ) from None

    def bot_for(self, collection: str) -> str:
        """The one loaded bot that serves ``collection``.

        Raises:
            ConfigurationError: no loaded bot serves it, or several do (name one: --bot).
        """
        bots: list[dict[str, Any]] = self._call("/api/v1/bots").get("bots", [])
        names: list[str] = sorted(
            b["name"]
            for b in bots
            if b.get("status") == "loaded" and b.get("collection") == collection
        )
        if len(names) == 1:
            return names[0]
        if not names:
            served = ", ".join(
                f"{b['name']} ({b.get('collection')})" for b in bots if b.get("status") == "loaded"
            )
            raise ConfigurationError(
                f"no bot on {self.url} serves collection {collection!r}"
                + (f"; its bots: {served}" if served else "; it serves no bot"),
                hint=f"add one: parrot-parents bots add NAME --collection {collection}, "
                "or name a bot with --bot",
            )
        raise ConfigurationError(
            f"several bots on {self.url} serve collection {collection!r}: {', '.join(names)}",
            hint="name one with --bot",
        )

    def collection_of(self, bot: str) -> str:
        """``GET /api/v1/bots/{bot}``'s ``collection``: the collection the bot searches.

        Raises:
            ParrotParentsError: the server answered an error (404 for an unknown bot).
        """
        path = f"/api/v1/bots/{urllib.parse.quote(bot, safe='')}"
        return str(self._call(path).get("collection"))

    def context(self, bot: str, question: str, options: dict[str, Any]) -> dict[str, Any]:
        """``POST /api/v1/bots/{bot}/context``: ``{"bot", "context", "passages", "meta"}``."""
        path = f"/api/v1/bots/{urllib.parse.quote(bot, safe='')}/context"
        return dict(self._call(path, {"question": question, **options}))


def _http_error(exc: urllib.error.HTTPError) -> Exception:
    try:
        body = json.loads(exc.read())
    except ValueError:
        body = {}
    message = body.get("error") if isinstance(body, dict) else None
    message = f"the server answered {exc.code}: {message or exc.reason}"
    hint = body.get("hint") if isinstance(body, dict) else None
    if exc.code >= 500:
        return ParrotParentsError(message, hint=hint)
    return ConfigurationError(message, hint=hint)
