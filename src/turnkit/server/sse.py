"""Server-Sent Events as a plain ASGI response: frames encoded once, written as they are.

A hundred streams of one session send the same events; each frame is built
once (:func:`frame`, cached by the caller) and every stream writes those
bytes with one ``send``: no per-send timer, no re-encoding. Around the
frames, :class:`EventStream` keeps what a long-lived stream needs:

- a keep-alive comment every ``ping`` seconds (``: ping - <time>``);
- the client going away (``http.disconnect``) ends the stream at once;
- the server stopping (uvicorn's ``should_exit``, looked for every
  :data:`STOP_POLL_S`) ends it cleanly, with the closing chunk, so the
  client resumes from its ``Last-Event-ID`` elsewhere.

The wire format is the one sse-starlette wrote before: ``id:``, ``event:``,
then one ``data:`` line per line of data, each line ended by CRLF, a blank
line after each event.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from datetime import UTC, datetime
from typing import Any

from starlette.responses import Response

__all__ = ["STOP_POLL_S", "EventStream", "frame"]

STOP_POLL_S = 0.5  # how often a stream looks whether the server is stopping
HEADERS = [
    (b"cache-control", b"no-store"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
    (b"content-type", b"text/event-stream; charset=utf-8"),
]
_LINES = re.compile(r"\r\n|\r|\n")

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]
Receive = Callable[[], Awaitable[Message]]


def frame(data: str, event: str | None = None, id: str | None = None) -> bytes:
    """One SSE event as bytes (``id:`` and ``event:`` lines only when given)."""
    head = ""
    if id is not None:
        head += f"id: {_LINES.sub('', id)}\r\n"
    if event is not None:
        head += f"event: {_LINES.sub('', event)}\r\n"
    body = "".join(f"data: {line}\r\n" for line in _LINES.split(data))
    return f"{head}{body}\r\n".encode()


def _server_stopping() -> bool:
    """Whether the uvicorn server of this process is shutting down (its signal handler
    is a method of the server, which has ``should_exit``)."""
    server = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    return bool(getattr(server, "should_exit", False))


class EventStream(Response):
    """An ASGI response streaming ``frames`` (SSE bytes) until they end, the client
    leaves or the server stops (a Starlette ``Response``, so FastAPI sends it as is)."""

    def __init__(self, frames: AsyncIterator[bytes], ping: float) -> None:
        self.frames = frames
        self.ping = ping
        self.status_code = 200
        self.background = None
        self.raw_headers = list(HEADERS)

    async def __call__(self, scope: Any, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        pump = asyncio.ensure_future(self._pump(send))
        watch = asyncio.ensure_future(self._watch(send))
        listen = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({pump, watch, listen}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone = listen.done()  # the client left: nothing more is sent
            for task in (pump, watch, listen):
                task.cancel()
            for task in (watch, listen, pump):  # an error of the frames' source is raised
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            with contextlib.suppress(Exception):
                await self.frames.aclose()  # type: ignore[attr-defined]
        if not gone:  # the stream ended, or the server stops: end the body properly
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        if self.background is not None:
            await self.background()

    async def _pump(self, send: Send) -> None:
        async for data in self.frames:
            await send({"type": "http.response.body", "body": data, "more_body": True})

    async def _watch(self, send: Send) -> None:
        """Keep-alive comments, and the end of the stream once the server stops."""
        loop = asyncio.get_running_loop()
        next_ping = loop.time() + self.ping if self.ping > 0 else float("inf")  # 0: no pings
        while not _server_stopping():
            await asyncio.sleep(max(0.0, min(STOP_POLL_S, next_ping - loop.time())))
            if loop.time() >= next_ping:
                comment = f": ping - {datetime.now(UTC)}\r\n\r\n".encode()
                await send({"type": "http.response.body", "body": comment, "more_body": True})
                next_ping = loop.time() + self.ping


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
