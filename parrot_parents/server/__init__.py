"""The HTTP service of parrot-parents (aiohttp): ``parrot-parents serve``.

``create_app`` loads on first use (:mod:`parrot_parents.lazy`), so the CLI can read the
service's settings (:mod:`parrot_parents.server.limits`) without importing aiohttp.
"""

from typing import TYPE_CHECKING

from parrot_parents.lazy import lazy_exports
from parrot_parents.server.limits import DEFAULT_MAX_BODY_BYTES, TOKEN_ENV

__all__ = ["DEFAULT_MAX_BODY_BYTES", "TOKEN_ENV", "create_app"]

__getattr__, __dir__ = lazy_exports(__name__, globals())

if TYPE_CHECKING:
    from parrot_parents.server.app import create_app
