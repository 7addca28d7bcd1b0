"""The SSE response itself: frames written from outside its task stay in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from turnkit.server.sse import EventStream

TIMEOUT = 10


async def test_a_direct_write_that_must_wait_keeps_the_frames_in_order() -> None:
    sent: list[bytes] = []
    reading = asyncio.Event()  # the client reads again: a waiting send goes on
    more = asyncio.Event()

    async def send(message: dict[str, Any]) -> None:
        if message.get("body") == b"2":
            await reading.wait()  # as uvicorn's send waits while the client is behind
        if message["type"] == "http.response.body":
            sent.append(message["body"])

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # the client stays
        return {}

    async def frames() -> AsyncIterator[bytes]:
        yield b"1"
        await more.wait()
        yield b"4"

    stream = EventStream(frames(), ping=0)
    assert not stream.write_now(b"0")  # not started: nothing written
    task = asyncio.ensure_future(stream({"type": "http"}, receive, send))
    while sent != [b"1"]:
        await asyncio.sleep(0)
    assert stream.write_now(b"2")  # written, but its send waits for the client
    assert not stream.write_now(b"3")  # busy: the follower gives it itself
    more.set()  # the stream's own next frame waits for the direct write
    for _ in range(20):
        await asyncio.sleep(0)
    assert sent == [b"1"]
    reading.set()
    await asyncio.wait_for(task, TIMEOUT)
    assert sent == [b"1", b"2", b"4", b""]  # in order, then the end of the body
    assert not stream.write_now(b"5")  # ended
