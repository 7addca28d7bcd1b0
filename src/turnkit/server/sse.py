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

:meth:`EventStream.write_now` writes a frame from outside the stream's task
(the live hub serves all of a session's streams in one step): straight to
the connection when it can (:mod:`turnkit.server.direct`), else as a send
that, if it need not wait, ends there, and if it must (the client reads
slowly) ends in a task, which the stream's next frames wait for, so the
order holds.

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

from turnkit.server.direct import chunk_transport, write_chunk

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

    def __init__(self, frames: AsyncIterator[bytes] | None, ping: float) -> None:
        self.frames = frames  # may be set after, by the source that writes through write_now
        self.ping = ping
        self.status_code = 200
        self.background = None
        self.raw_headers = list(HEADERS)
        self._send: Send | None = None  # while the body is being sent
        self._writing: asyncio.Future[Any] | None = None  # a write_now still waiting
        self._transport: Any = None  # chunks may be written straight to it: turnkit.server.direct

    def write_now(self, data: bytes) -> bool:
        """Write ``data`` at once, from outside the stream's own task (the live hub's one
        step for all followers); False, and nothing written, when this stream cannot now
        (not started, ended, or a write still waiting for the client to read)."""
        transport = self._transport  # set while the body is being sent, with _send
        if transport is not None and self._writing is None and write_chunk(transport, data):
            return True
        if self._send is None or self._writing is not None:
            return False
        body = self._send({"type": "http.response.body", "body": data, "more_body": True})
        try:  # a send that need not wait ends in this step; one that must, ends in a task
            waits_on = body.send(None)
        except StopIteration:
            return True
        except Exception:  # the stream is broken: its own task finds out
            return False
        self._writing = asyncio.ensure_future(_Resumed(body, waits_on).wait())
        return True

    async def __call__(self, scope: Any, receive: Receive, send: Send) -> None:
        assert self.frames is not None
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        self._transport = chunk_transport(scope)
        self._send = send
        pump = asyncio.ensure_future(self._pump(send))
        watch = asyncio.ensure_future(self._watch(send))
        listen = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait({pump, watch, listen}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._send = self._transport = None
            gone = listen.done()  # the client left: nothing more is sent
            for task in (pump, watch, listen):
                task.cancel()
            for task in (watch, listen, pump):  # an error of the frames' source is raised
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            with contextlib.suppress(Exception):
                await self.frames.aclose()  # type: ignore[attr-defined]
            if self._writing is not None:  # a client that does not read gets no more
                self._writing.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._writing
        if not gone:  # the stream ended, or the server stops: end the body properly
            with contextlib.suppress(OSError):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        if self.background is not None:
            await self.background()

    async def _pump(self, send: Send) -> None:
        assert self.frames is not None
        async for data in self.frames:
            await self._written()  # in order after what write_now wrote
            await send({"type": "http.response.body", "body": data, "more_body": True})

    async def _written(self) -> None:
        """Wait for a write of :meth:`write_now` that had to wait (its error is the
        stream's: the client is gone)."""
        writing = self._writing
        if writing is not None:
            try:
                await writing
            finally:
                self._writing = None

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


class _Resumed:
    """The rest of a coroutine started by hand (``coro.send(None)``) that stopped at
    ``waits_on``: awaited in a task, it goes on as if it had been that task's from
    the start (what it waits for, the results and errors, pass through)."""

    def __init__(self, coro: Any, waits_on: Any) -> None:
        self.coro, self.waits_on = coro, waits_on

    def __await__(self) -> Any:
        waits_on = self.waits_on
        while True:
            try:
                sent = yield waits_on
            except BaseException as err:  # e.g. the task was cancelled: the coroutine sees it
                try:
                    waits_on = self.coro.throw(err)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    waits_on = self.coro.send(sent)
                except StopIteration as stop:
                    return stop.value

    async def wait(self) -> Any:
        return await self


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
