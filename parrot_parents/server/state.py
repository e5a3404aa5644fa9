"""What the HTTP handlers share: the bot manager, the LLM client and the settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from parrot_parents.bots.manager import BotManager
from parrot_parents.llm.client import ChatCompletionsClient
from parrot_parents.server.limits import DEFAULT_BODY_TIMEOUT_S

__all__ = ["REQUEST_ID", "STATE", "ServerState"]


@dataclass
class ServerState:
    """Attributes:
    manager: the loaded bots.
    llm: the chat-completions client, or None (``ask`` answers 501).
    writes_enabled: bot writes (PUT/PATCH/DELETE) are allowed; only with a token.
    max_body_bytes: request body limit in bytes.
    auto_reload: refresh changed bot rows before each request.
    body_timeout_s: seconds a request may take to send its body (then 408).
    """

    manager: BotManager
    llm: ChatCompletionsClient | None
    writes_enabled: bool
    max_body_bytes: int
    auto_reload: bool
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S


STATE = web.AppKey("parrot_parents_state", ServerState)

#: Per-request id (echoed in ``X-Request-Id`` and in error bodies, and logged).
REQUEST_ID: Any = web.RequestKey("request_id", str) if hasattr(web, "RequestKey") else "request_id"
