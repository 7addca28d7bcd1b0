"""Following events over Server-Sent Events: resumption, many followers, no gaps or repeats."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx2

from .conftest import API_KEY, echo_app, serving

AUTH = {"Authorization": f"Bearer {API_KEY}"}
STREAM = {**AUTH, "Accept": "text/event-stream"}


async def sse(response: httpx2.Response) -> AsyncIterator[dict]:
    """The events of an SSE response: {id, event, data}; comments (pings) skipped."""
    fields: dict = {}
    async for line in response.aiter_lines():
        if not line:
            if "data" in fields:
                yield fields
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


async def follow(client: httpx2.AsyncClient, sid: str, headers: dict | None = None) -> list:
    got = []
    async with client.stream("GET", f"/sessions/{sid}/events", headers=headers or STREAM) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        async for event in sse(r):
            data = json.loads(event["data"])
            assert int(event["id"]) == data["seq"] and event["event"] == data["type"]
            got.append(data)
    return got


async def test_a_follower_resumes_after_last_event_id_with_exactly_what_followed(
    db_url: str,
) -> None:
    with serving(echo_app(db_url)) as base:
        async with httpx2.AsyncClient(base_url=base, headers=AUTH, timeout=30) as http:
            sid = (await http.post("/sessions", json={"agent": "echo"})).json()["id"]
            first = await http.post(f"/sessions/{sid}/turns", json={"input": {"text": "a"}})
            seen = []
            async with http.stream("GET", f"/sessions/{sid}/events", headers=STREAM) as r:
                async for event in sse(r):
                    seen.append(json.loads(event["data"]))
                    if event["event"] == "turn.completed":
                        break  # disconnect mid-session
            last = seen[-1]["seq"]
            assert [e["seq"] for e in seen] == list(range(1, last + 1))
            for text in ["b", "c"]:
                await http.post(f"/sessions/{sid}/turns", json={"input": {"text": text}})
            await http.post(f"/sessions/{sid}/end")
            resumed = await follow(http, sid, {**STREAM, "Last-Event-ID": str(last)})
            everything = (await http.get(f"/sessions/{sid}/events")).json()
            assert resumed == everything[last:]
            assert resumed[0]["seq"] == last + 1
            assert seen + resumed == everything
            assert first.json()["turn_id"] == everything[0]["turn_id"]
            by_query = await follow(http, sid, STREAM | {"Last-Event-ID": "0"})
            assert by_query == everything


async def test_a_hundred_followers_each_receive_every_event_once(db_url: str) -> None:
    with serving(echo_app(db_url)) as base:
        limits = httpx2.Limits(max_connections=200)
        async with httpx2.AsyncClient(
            base_url=base, headers=AUTH, timeout=60, limits=limits
        ) as http:
            sid = (await http.post("/sessions", json={"agent": "echo"})).json()["id"]

            async def feed() -> None:
                for n in range(10):  # written while the followers connect
                    await http.post(f"/sessions/{sid}/turns", json={"input": {"text": f"t{n}"}})
                await http.post(f"/sessions/{sid}/end")

            followers = [asyncio.create_task(follow(http, sid)) for _ in range(100)]
            await feed()
            results = await asyncio.wait_for(asyncio.gather(*followers), 120)
            everything = (await http.get(f"/sessions/{sid}/events")).json()
            assert len(everything) >= 10
            assert {e["type"] for e in everything} >= {"input.received", "turn.completed"}
            for got in results:
                assert got == everything


async def test_an_idle_stream_gets_keep_alive_comments(db_url: str) -> None:
    with serving(echo_app(db_url), sse_ping=0.1) as base:
        async with httpx2.AsyncClient(base_url=base, headers=AUTH, timeout=30) as http:
            sid = (await http.post("/sessions", json={"agent": "echo"})).json()["id"]
            comments = 0
            async with http.stream("GET", f"/sessions/{sid}/events", headers=STREAM) as r:
                async for line in r.aiter_lines():
                    assert not line.startswith(("id:", "data:")), line  # nothing happened
                    comments += line.startswith(":")
                    if comments == 3:
                        break
