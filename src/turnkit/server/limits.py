"""Request bodies: refused over their size limit before being read whole, and JSON only.

A pure ASGI middleware, below FastAPI: it answers 413 at once when
``Content-Length`` is over the route's limit, else reads the body in chunks
and stops at the first byte past it. A body that is kept is replayed to the
app unchanged. A POST with a body that is not ``application/json`` (or a
``+json`` type) is 415.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from turnkit.server.problems import PROBLEM_TYPE, problem_bytes

__all__ = ["DEFAULT_BODY_LIMIT", "WEBHOOK_BODY_LIMIT", "BodyLimits"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DEFAULT_BODY_LIMIT = 1024 * 1024  # text plus a 256 KiB payload, with room to spare
WEBHOOK_BODY_LIMIT = 256 * 1024


class _TooLarge(Exception):
    pass


class BodyLimits:
    """Enforce the body size limit of each route, and JSON bodies on POST."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        limit = WEBHOOK_BODY_LIMIT if scope["path"].startswith("/webhooks/") else DEFAULT_BODY_LIMIT
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            await _refuse(send, 413, f"the body is {declared} bytes; the limit is {limit}")
            return
        try:
            body = await _read(receive, limit)
        except _TooLarge:
            await _refuse(send, 413, f"the body is over the limit of {limit} bytes")
            return
        if body and not _is_json(headers.get("content-type", "")):
            given = headers.get("content-type") or "none"
            await _refuse(send, 415, f"send the body as application/json (Content-Type: {given})")
            return
        await self.app(scope, _replay(body, receive), send)


async def _read(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def _refuse(send: Send, status: int, detail: str) -> None:
    body = problem_bytes(status, detail)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", PROBLEM_TYPE.encode()),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
