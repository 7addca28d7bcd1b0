"""Live output: time to first delta and per-delta delay, vs the model read directly.

Run: python bench/bench_live.py [--pieces N] [--followers N] [--rounds N]

One streaming scripted model (:class:`turnkit.testing.StreamingScriptedModel`,
4 characters a piece, a piece every 25 ms, so coalescing never merges two)
is read four ways in one run, each on a fresh SQLite database (WAL):

- floor: ``model.stream()`` iterated directly;
- ``app.follow(session, live=True)`` in the process that runs the turn;
- SSE ``GET /sessions/{id}/events?live=true`` from a server in this process
  (uvicorn in a thread), one follower;
- the same with F followers of one turn.

Each App runs a first turn to warm up; the second is measured.
Time to first delta: from the model call's start to the first delta read.
Per-delta delay: from the model yielding a piece to that piece's delta
being read (the same clock, ``time.perf_counter``). Goals: the first delta
within 5 ms of the floor; F SSE followers under 2x one follower's delay.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from turnkit.providers.base import ModelRequest
from turnkit.sessions import App, LiveEvent
from turnkit.testing import StreamingScriptedModel

CHUNK = 4
DELAY = 0.025


def text_of(pieces: int) -> str:
    return ("word" * pieces)[: pieces * CHUNK]


def model_for(pieces: int, rounds: int) -> StreamingScriptedModel:
    return StreamingScriptedModel([text_of(pieces)] * rounds, chunk=CHUNK, delay=DELAY)


def delays(
    model: StreamingScriptedModel, got: list[tuple[int, float]]
) -> tuple[float, list[float]]:
    """Time to first delta, and each piece's delay (ms), from (index, read at) pairs."""
    first = (got[0][1] - model.call_times[-1]) * 1000
    times = model.piece_times[-len(got) :] if len(got) <= len(model.piece_times) else []
    return first, [(at - times[i]) * 1000 for i, (_, at) in enumerate(got) if i < len(times)]


async def floor(pieces: int) -> tuple[float, list[float]]:
    model = model_for(pieces, 1)
    got = []
    async for event in model.stream(ModelRequest(())):
        if event.type == "text_delta":
            got.append((len(got), time.perf_counter()))
    return delays(model, got)


def live_app(db: Path, model: StreamingScriptedModel) -> App:
    app = App(f"sqlite:///{db}", fire_schedules=False)
    app.agent("writer", model=model)(lambda: "Write.")
    return app


async def through_follow(db: Path, pieces: int) -> tuple[float, list[float]]:
    model = model_for(pieces, 2)
    app = live_app(db, model)
    async with app:
        session = await app.create_session("writer")
        for _ in range(2):  # the first turn warms the App up; the second is measured
            got: list[tuple[int, float]] = []
            follower = app.follow(session.id, after=len(await app.events(session.id)), live=True)
            await app.send(session.id, text="Go")
            async for item in follower:
                if isinstance(item, LiveEvent):
                    got.append((item.index, time.perf_counter()))
                elif item.type == "turn.completed":
                    break
            await follower.aclose()
    return delays(model, got)


async def sse_follower(http: Any, url: str, ready: asyncio.Event) -> list[tuple[int, float]]:
    got = []
    async with http.stream("GET", url, headers={"Accept": "text/event-stream"}) as stream:
        ready.set()
        event = None
        async for line in stream.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "text.delta":
                got.append((json.loads(line[6:])["index"], time.perf_counter()))
            elif line.startswith("data: ") and event == "turn.completed":
                return got
    return got


async def through_sse(db: Path, pieces: int, followers: int) -> list[tuple[float, list[float]]]:
    import httpx2
    import uvicorn

    from turnkit.server import create_app

    model = model_for(pieces, 2)
    app = live_app(db, model)
    config = uvicorn.Config(create_app(app, None), host="127.0.0.1", port=0, log_level="error")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    limits = httpx2.Limits(max_connections=followers + 10)
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx2.AsyncClient(base_url=base, timeout=60, limits=limits) as http:
            sid = (await http.post("/sessions", json={"agent": "writer"})).json()["id"]
            warm = await http.post(f"/sessions/{sid}/turns", json={"input": {"text": "Warm"}})
            await app.wait(warm.json()["turn_id"], timeout=60)  # the first turn warms up
            after = len(await app.events(sid))
            url = f"/sessions/{sid}/events?live=true&after={after}"
            readies = [asyncio.Event() for _ in range(followers)]
            tasks = [asyncio.ensure_future(sse_follower(http, url, r)) for r in readies]
            await asyncio.gather(*(r.wait() for r in readies))
            while app.runtime.live.followers < followers:  # every stream subscribed
                await asyncio.sleep(0.01)
            await http.post(f"/sessions/{sid}/turns", json={"input": {"text": "Go"}})
            results = await asyncio.gather(*tasks)
    finally:
        server.should_exit = True
        thread.join(10)
    return [delays(model, got) for got in results]


def p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


async def main(pieces: int, followers: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench_live_"))
    rows = [("floor: model.stream()", await floor(pieces))]
    rows.append(("follow(live=True)", await through_follow(tmp / "f.db", pieces)))
    (one,) = await through_sse(tmp / "s1.db", pieces, 1)
    rows.append(("SSE ?live=true, 1 follower", one))
    many = await through_sse(tmp / "sn.db", pieces, followers)
    pooled = (statistics.mean(f for f, _ in many), [d for _, ds in many for d in ds])
    rows.append((f"SSE ?live=true, {followers} followers", pooled))
    base_first = rows[0][1][0]
    print(f"{pieces} deltas of {CHUNK} chars, one every {DELAY * 1000:.0f} ms (SQLite, WAL)\n")
    header = f"{'path':<34}{'first delta ms':>15}{'vs floor ms':>12}{'delay p50':>11}{'p95':>8}"
    print(header)
    print("-" * len(header))
    for name, (first, ds) in rows:
        extra = first - base_first
        print(f"{name:<34}{first:>15.2f}{extra:>+12.2f}{p(ds, 0.5):>11.2f}{p(ds, 0.95):>8.2f}")
    ratio = p(pooled[1], 0.5) / max(p(one[1], 0.5), 1e-9)
    print(f"\n{followers} SSE followers / 1 follower, median per-delta delay: {ratio:.2f}x")
    print(f"first delta through follow(live=True) vs floor: {rows[1][1][0] - base_first:+.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pieces", type=int, default=40)
    parser.add_argument("--followers", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(main(args.pieces, args.followers))
