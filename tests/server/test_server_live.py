"""SSE with ``?live=true``: a reconnect mid-message resumes the log exactly."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx2

from server.conftest import API_KEY, serving
from turnkit.sessions import App
from turnkit.testing import StreamingScriptedModel

ANSWER = "A reply long enough to be cut in the middle by a reconnect."


def sse(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    event: dict[str, Any] = {}
    for line in lines:
        if not line:
            if "data" in event:
                yield event
            event = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            event[name] = value.removeprefix(" ")


def test_a_reconnect_mid_message_gets_the_call_from_its_start_and_each_event_once(
    db_url: str,
) -> None:
    hold = threading.Event()
    model = StreamingScriptedModel([ANSWER], chunk=3, hold=hold, hold_after=4)
    app = App(db_url, fire_schedules=False)
    app.agent("writer", model=model)(lambda: "Write.")
    auth = {"Authorization": f"Bearer {API_KEY}"}
    with serving(app) as base, httpx2.Client(base_url=base, headers=auth, timeout=20) as http:
        sid = http.post("/sessions", json={"agent": "writer"}).json()["id"]
        http.post(f"/sessions/{sid}/turns", json={"input": {"text": "Go"}})
        url = f"/sessions/{sid}/events?live=true"
        first: list[dict[str, Any]] = []
        with http.stream("GET", url, headers={"Accept": "text/event-stream"}) as stream:
            for event in sse(stream.iter_lines()):
                first.append(event)
                if event["event"] == "text.delta":
                    break  # the connection drops mid-message
        last_id = [e["id"] for e in first if "id" in e][-1]
        second: list[dict[str, Any]] = []
        headers = {"Accept": "text/event-stream", "Last-Event-ID": last_id}
        with http.stream("GET", url, headers=headers) as stream:
            for event in sse(stream.iter_lines()):
                second.append(event)
                if event["event"] == "text.delta":
                    hold.set()  # reconnected mid-message: let the rest come
                if event["event"] == "turn.completed":
                    break
    ids = [int(e["id"]) for e in first + second if "id" in e]
    assert ids == list(range(1, len(ids) + 1))  # no durable event missing or repeated
    deltas = [json.loads(e["data"]) for e in second if e["event"] == "text.delta"]
    assert deltas[0]["index"] == 0  # from the start of the model call
    assert "".join(d["data"]["text"] for d in deltas) == ANSWER
    assert [d["index"] for d in deltas] == list(range(len(deltas)))
    assert all("id" not in e for e in second if e["event"].endswith(".delta"))


async def test_twenty_live_followers_each_get_every_delta_once_then_the_message(
    db_url: str,
) -> None:
    import asyncio

    text = "Twenty streams of one session, every delta to each of them. " * 3
    app = App(db_url, fire_schedules=False)
    app.agent("writer", model=StreamingScriptedModel([text], chunk=4, delay=0.004))(
        lambda: "Write."
    )
    auth = {"Authorization": f"Bearer {API_KEY}"}
    stream_headers = {"Accept": "text/event-stream"}
    limits = httpx2.Limits(max_connections=50)
    with serving(app) as base:
        async with httpx2.AsyncClient(
            base_url=base, headers=auth, timeout=30, limits=limits
        ) as http:
            sid = (await http.post("/sessions", json={"agent": "writer"})).json()["id"]
            subscribed = asyncio.Event()
            opened = 0

            async def follow() -> list[dict[str, Any]]:
                nonlocal opened
                got: list[dict[str, Any]] = []
                url = f"/sessions/{sid}/events?live=true"
                async with http.stream("GET", url, headers=stream_headers) as r:
                    opened += 1
                    if opened == 20:
                        subscribed.set()
                    event: dict[str, Any] = {}
                    async for line in r.aiter_lines():
                        if line:
                            name, _, value = line.partition(":")
                            event[name] = value.removeprefix(" ")
                            continue
                        if "data" in event:
                            got.append(event)
                            if event["event"] == "turn.completed":
                                return got
                        event = {}
                return got

            followers = [asyncio.ensure_future(follow()) for _ in range(20)]
            await asyncio.wait_for(subscribed.wait(), 30)
            await http.post(f"/sessions/{sid}/turns", json={"input": {"text": "Go"}})
            results = await asyncio.wait_for(asyncio.gather(*followers), 60)
    for got in results:
        deltas = [json.loads(e["data"]) for e in got if e["event"] == "text.delta"]
        assert [d["index"] for d in deltas] == list(range(len(deltas)))
        assert "".join(d["data"]["text"] for d in deltas) == text
        ids = [int(e["id"]) for e in got if "id" in e]
        assert ids == list(range(1, len(ids) + 1))
        last_delta = max(i for i, e in enumerate(got) if e["event"] == "text.delta")
        reply = [i for i, e in enumerate(got) if e["event"] == "message"][-1]
        assert reply > last_delta and "id" not in got[last_delta]
