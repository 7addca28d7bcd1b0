"""Following events over Server-Sent Events: resumption, many followers, no gaps or repeats."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2

from .conftest import API_KEY, echo_app, serving

AUTH = {"Authorization": f"Bearer {API_KEY}"}
STREAM = {**AUTH, "Accept": "text/event-stream"}
ROOT = Path(__file__).parents[2]


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


async def test_the_wire_format_is_crlf_lines_with_the_id_only_on_durable_events(
    db_url: str,
) -> None:
    with serving(echo_app(db_url)) as base:
        async with httpx2.AsyncClient(base_url=base, headers=AUTH, timeout=30) as http:
            sid = (await http.post("/sessions", json={"agent": "echo"})).json()["id"]
            await http.post(f"/sessions/{sid}/turns", json={"input": {"text": "a"}})
            await http.post(f"/sessions/{sid}/end")
            raw = b""
            url = f"/sessions/{sid}/events?live=true"
            async with http.stream("GET", url, headers=STREAM) as r:
                assert r.headers["cache-control"] == "no-store"
                assert r.headers["x-accel-buffering"] == "no"
                assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
                async for chunk in r.aiter_raw():
                    raw += chunk
            everything = (await http.get(f"/sessions/{sid}/events")).json()
    frames = raw.split(b"\r\n\r\n")
    assert frames[-1] == b""  # every event ends with a blank line
    durable = [f for f in frames[:-1] if f.startswith(b"id: ")]
    assert len(durable) == len(everything)
    for got, event in zip(durable, everything, strict=True):
        head = f"id: {event['seq']}\r\nevent: {event['type']}\r\ndata: ".encode()
        assert got.startswith(head) and json.loads(got[len(head) :]) == event
    for other in (f for f in frames[:-1] if not f.startswith(b"id: ")):
        assert other.startswith(b"event: text.delta\r\ndata: {"), other


def test_a_stream_ends_cleanly_when_turnkit_serve_stops(tmp_path: Path) -> None:
    env = {**os.environ, "TURNKIT_DATABASE_URL": f"sqlite:///{tmp_path / 'stop.db'}"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "turnkit", "serve", "examples/server_app.py", "--port", "0"]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        base = proc.stdout.readline().split(" at ", 1)[1].split()[0]
        with httpx2.Client(base_url=base, timeout=30) as http:
            sid = http.post("/sessions", json={"agent": "support"}).json()["id"]
            with http.stream("GET", f"/sessions/{sid}/events", headers=STREAM) as r:
                started = time.monotonic()
                proc.send_signal(signal.SIGINT)
                body = r.read()  # a truncated body would raise RemoteProtocolError
            assert body == b"" and time.monotonic() - started < 10
        assert proc.wait(30) == 0
    finally:
        proc.kill()
        proc.wait()
