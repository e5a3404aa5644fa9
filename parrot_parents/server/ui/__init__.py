"""The inspector page at ``/ui``: static HTML, CSS and a small script shipped in the wheel.

No build step, no CDN, no data in the files: the page calls the JSON API with the token the
user types (docs/service.md, "The inspector page").
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

__all__ = ["STATIC_DIR", "add_ui_routes"]

#: The page's files (index.html, inspector.css, inspector.js).
STATIC_DIR = Path(__file__).resolve().parent / "static"

# The page loads only its own files and talks only to this server.
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


async def _redirect(request: web.Request) -> web.StreamResponse:
    raise web.HTTPPermanentRedirect("/ui/")


async def _asset(request: web.Request) -> web.StreamResponse:
    name = request.match_info.get("name", "index.html")
    path = STATIC_DIR / name
    # Only the page's own files, by plain name (no folders, no dot files).
    if "/" in name or name.startswith(".") or not path.is_file():
        raise web.HTTPNotFound()
    return web.FileResponse(path, headers=_HEADERS)


def add_ui_routes(app: web.Application) -> None:
    """Serve the inspector: ``/ui`` redirects to ``/ui/``, which is ``index.html``."""
    app.router.add_get("/ui", _redirect)
    app.router.add_get("/ui/", _asset)
    app.router.add_get("/ui/{name}", _asset)
