"""The HTTP service of parrot-parents (aiohttp): ``parrot-parents serve``."""

from parrot_parents.server.app import DEFAULT_MAX_BODY_BYTES, TOKEN_ENV, create_app

__all__ = ["DEFAULT_MAX_BODY_BYTES", "TOKEN_ENV", "create_app"]
