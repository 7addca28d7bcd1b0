"""Live deltas written straight to uvicorn's connection (``turnkit.server.direct``).

Served by the uvicorn installed here, with its httptools protocol: the chunks
of a live stream skip the ASGI wrappers and still arrive whole and in order;
with a middleware of the user's (which might change a body) every chunk goes
through ASGI, as it would without turnkit's shortcut.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest

from server.conftest import API_KEY, serving_api
from server.test_server_live import sse
from turnkit.server import create_app
from turnkit.server import direct as direct_module
from turnkit.sessions import App
from turnkit.testing import StreamingScriptedModel

TEXT = "Every piece of this reply goes out as its own chunk, whole and in order."
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def writer_app(db_url: str) -> App:
    app = App(db_url, fire_schedules=False)
    model = StreamingScriptedModel([TEXT], chunk=5, delay=0.01)
    app.agent("writer", model=model)(lambda: "Write.")
    return app


def follow_one_turn(base: str) -> list[dict[str, Any]]:
    """The SSE events of one turn, followed live from before it starts."""
    with httpx2.Client(base_url=base, headers=AUTH, timeout=30) as http:
        sid = http.post("/sessions", json={"agent": "writer"}).json()["id"]
        events: list[dict[str, Any]] = []
        url = f"/sessions/{sid}/events?live=true"
        with http.stream("GET", url, headers={"Accept": "text/event-stream"}) as stream:
            lines = stream.iter_lines()
            http.post(f"/sessions/{sid}/turns", json={"input": {"text": "Go"}})
            for event in sse(lines):
                events.append(event)
                if event["event"] == "turn.completed":
                    break
    return events


def check_deltas(events: list[dict[str, Any]]) -> None:
    deltas = [json.loads(e["data"]) for e in events if e["event"] == "text.delta"]
    assert "".join(d["data"]["text"] for d in deltas) == TEXT
    assert [d["index"] for d in deltas] == list(range(len(deltas)))
    names = [e["event"] for e in events]
    reply = len(names) - 1 - names[::-1].index("message")
    assert reply > max(i for i, name in enumerate(names) if name == "text.delta")


@pytest.fixture
def chunks(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The frames written straight to a connection, as they are framed."""
    written: list[bytes] = []
    real = direct_module._chunk

    def spy(data: bytes) -> bytes:
        written.append(data)
        return real(data)

    monkeypatch.setattr(direct_module, "_chunk", spy)
    return written


def test_live_deltas_go_straight_to_the_connection_and_arrive_whole(
    db_url: str, chunks: list[bytes]
) -> None:
    with serving_api(create_app(writer_app(db_url), API_KEY), http="httptools") as base:
        events = follow_one_turn(base)
    check_deltas(events)
    assert chunks, "no delta took the direct path with the uvicorn installed here"
    assert all(frame.startswith(b"event: text.delta\r\n") for frame in chunks)


def test_with_a_middleware_of_the_users_every_chunk_goes_through_asgi(
    db_url: str, chunks: list[bytes]
) -> None:
    seen: list[bytes] = []

    class Watching:
        def __init__(self, app: Any) -> None:
            self.app = app

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            async def sending(message: Any) -> None:
                if message["type"] == "http.response.body":
                    seen.append(message.get("body", b""))
                await send(message)

            await self.app(scope, receive, sending)

    api = create_app(writer_app(db_url), API_KEY)
    api.add_middleware(Watching)
    with serving_api(api, http="httptools") as base:
        events = follow_one_turn(base)
    check_deltas(events)
    assert chunks == []
    passed = b"".join(seen)
    for event in events:
        if event["event"] == "text.delta":
            assert f"data: {event['data']}\r\n".encode() in passed


def test_no_direct_path_without_uvicorns_own_send() -> None:
    async def send(message: Any) -> None:
        pass

    assert direct_module.chunk_transport({}) is None
    assert direct_module.chunk_transport({direct_module.RAW_SEND: send}) is None


class FakeTransport:
    """An asyncio transport's API, as far as the writer reads it."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.buffered = 0
        self.closing = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return self.buffered


def test_the_writer_leaves_a_slow_or_gone_client_to_asgi() -> None:
    from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

    cycle = object.__new__(RequestResponseCycle)  # only what the writer reads of it
    cycle.transport = transport = FakeTransport()
    cycle.chunked_encoding, cycle.response_started = True, True
    found = direct_module.chunk_transport({direct_module.RAW_SEND: cycle.send})
    assert found is transport

    def write(data: bytes) -> bool:
        return direct_module.write_chunk(transport, data)

    assert write(b"event: a\r\n\r\n")
    assert transport.written == [b"c\r\nevent: a\r\n\r\n\r\n"]  # one chunk, framed
    transport.buffered = 10  # the client has not read what was sent
    assert not write(b"event: b\r\n\r\n")
    transport.buffered, transport.closing = 0, True  # the client left
    assert not write(b"event: c\r\n\r\n")
    assert not write(b"")
    assert len(transport.written) == 1

    cycle.chunked_encoding = False  # e.g. a response with a Content-Length
    assert direct_module.chunk_transport({direct_module.RAW_SEND: cycle.send}) is None
