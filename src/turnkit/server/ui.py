"""``GET /ui``: the inspector page, plain HTML/JS/CSS shipped in the package.

The page holds no data: it is open (like ``/healthz``) and every request it
makes goes to the guarded routes with the key the person types, kept in
the tab's ``sessionStorage``. Its files are read from ``static/`` once, when
the routes are made, and served from a fixed list (no directory listing, no
path from the request reaches the file system). Each answer carries a strict
``Content-Security-Policy``: scripts, styles and connections only from this
server, no inline script or style, images only from this server, ``data:``
(base64 image blocks) and ``https:`` (url image blocks), no frames, no forms
posting elsewhere.
"""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import RedirectResponse, Response
from starlette.exceptions import HTTPException

__all__ = ["CONTENT_SECURITY_POLICY", "ui_routes"]

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data: https:; font-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}

_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def _files() -> dict[str, tuple[bytes, str]]:
    """Every file of ``static/`` by name, with its content type."""
    found: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files("turnkit.server").joinpath("static").iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _TYPES:
            found[entry.name] = (entry.read_bytes(), _TYPES[suffix])
    return found


def ui_routes() -> APIRouter:
    """The page (``/ui``) and its assets (``/ui/static/<name>``), without the API key."""
    files = _files()
    router = APIRouter(include_in_schema=False)

    def serve(name: str) -> Response:
        body, media_type = files[name]
        return Response(body, media_type=media_type, headers=_HEADERS)

    @router.get("/ui")
    async def page() -> Response:
        return serve("index.html")

    @router.get("/ui/")
    async def page_slash() -> Response:
        return RedirectResponse("/ui", status_code=308)

    @router.get("/ui/static/{name}")
    async def asset(name: str) -> Response:
        if name not in files or name == "index.html":
            raise HTTPException(404, f"the inspector has no file {name!r}")
        return serve(name)

    return router
