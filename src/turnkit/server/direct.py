"""Body chunks of a long-lived stream written straight to uvicorn's connection.

A live delta goes to a hundred SSE streams in one step of the loop. Through
ASGI, each write is a ``send`` that passes five wrappers (Starlette's and
FastAPI's middleware, each an ``async`` call) before uvicorn frames it and
writes it to the socket: the wrappers cost as much as the write itself.
None of them looks at a body chunk (they watch ``http.response.start`` and
errors), so a stream may write its chunks to uvicorn's transport itself,
when all of these hold:

- the server is uvicorn with its httptools protocol, and the ``send`` that
  reached the application is that protocol's own (nothing wrapped it);
- the application's middleware is turnkit's own (``user_middleware`` holds
  nothing that could change a body, such as compression; FastAPI's own
  telemetry looks only at the response's start and its last body message,
  which still go through ASGI);
- the response has started, uses chunked encoding, is not complete, and the
  client is connected and reading: its transport (the asyncio API, whatever
  the loop) is not closing and holds nothing unsent.

Otherwise, or when any of it changes, the stream sends through ASGI as
before (uvicorn's send waits while writing is paused, and its bytes follow
those already buffered). The response start and its end always go through
ASGI. What is read of uvicorn's cycle (its send, transport and chunked
flag) is looked for first (a uvicorn without it gets no direct path);
``tests/server/test_sse_direct.py`` checks that the direct path is taken
with the uvicorn installed and that its chunks arrive whole, so an upgrade
that changes either is noticed.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from fastapi import FastAPI

from turnkit.server.limits import BodyLimits

__all__ = ["RAW_SEND", "TurnkitAPI", "chunk_transport", "write_chunk"]

RAW_SEND = "turnkit.raw_send"
"""The scope key under which :class:`TurnkitAPI` keeps the server's own ``send``."""

_HTTPTOOLS = "uvicorn.protocols.http.httptools_impl"


class TurnkitAPI(FastAPI):
    """The FastAPI application of ``create_app``: it keeps the server's ``send`` in the
    scope of each HTTP request when its middleware cannot change a body (middleware
    cannot be added once the application has started)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and all(m.cls is BodyLimits for m in self.user_middleware):
            scope[RAW_SEND] = send
        await super().__call__(scope, receive, send)


def chunk_transport(scope: MutableMapping[str, Any]) -> Any | None:
    """The transport of ``scope``'s connection, when body chunks of its response may be
    written straight to it with :func:`write_chunk`; None when its server is not one
    this can write to (see the module's notes).

    It is the response's until its last body message: whoever sends that stops
    writing to it first (:class:`~turnkit.server.sse.EventStream` does)."""
    send = scope.get(RAW_SEND)
    cycle = getattr(send, "__self__", None)
    kind = type(cycle)
    if kind.__module__ != _HTTPTOOLS or getattr(send, "__func__", None) is not kind.send:
        return None
    transport = getattr(cycle, "transport", None)
    if not all(hasattr(transport, name) for name in _TRANSPORT):
        return None
    if getattr(cycle, "chunked_encoding", None) is not True or not cycle.response_started:
        return None  # both are settled once the response has started
    return transport


def write_chunk(transport: Any, data: bytes) -> bool:
    """Write ``data`` to ``transport`` as one chunk; False, and nothing written, when it
    must go through ASGI instead (the client left or reads slowly)."""
    # Closing: the client left. Bytes still buffered: the client reads slowly, and
    # uvicorn's send, which waits while it is paused, writes after them in order.
    if not data or transport.is_closing() or transport.get_write_buffer_size():
        return False
    last = _last  # the chunk all streams are handed now
    transport.write(last[1] if last[0] is data else _chunk(data))
    return True


_TRANSPORT = ("write", "is_closing", "get_write_buffer_size")  # asyncio's Transport API
_last: tuple[bytes, bytes] = (b"", b"")


def _chunk(data: bytes) -> bytes:
    """``data`` as one chunk of chunked encoding, framed once for all streams (they
    are handed the same bytes one after another)."""
    global _last
    framed = b"%x\r\n%b\r\n" % (len(data), data)
    _last = (data, framed)
    return framed
