"""The HTTP API's overhead: turns accepted per second and SSE delivery latency, vs the Python API.

Run: python bench/bench_server.py [--turns N] [--followers N] [--events N]

The same App (SQLite, WAL) is driven two ways, each on a fresh database:

- Python API: ``app.send`` in this process; ``app.follow`` iterators as followers.
- HTTP: ``turnkit serve bench/bench_server.py:app`` in a subprocess, driven
  with httpx2: ``POST /sessions/{id}/turns`` and ``GET /sessions/{id}/events``
  as Server-Sent Events.

Turns accepted per second: N inputs sent 8 at a time over 16 sessions, by
an App that accepts them but runs no turns (``workers=False``), so the
figure is the accept path alone. Latency: one session, F followers, E inputs
sent one after the other; for each input, the time from just before the send
to its ``input.received`` event reaching each follower; p50 and p95 over all.
The ratio is HTTP over Python (the HTTP overhead; 1.0 would be none).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from turnkit.sessions import App
from turnkit.testing import ScriptedModel

CONCURRENCY = 8
SESSIONS = 16

# What `turnkit serve bench/bench_server.py:app` serves (the subprocess sets the env).
app = App(
    os.environ.get("TURNKIT_BENCH_DB", "sqlite:///.turnkit/bench.db"),
    workers=os.environ.get("TURNKIT_BENCH_WORKERS", "0") == "1",
    fire_schedules=False,
)
app.agent("echo", model=ScriptedModel([lambda r: "ok"] * 100_000))(lambda: "Echo.")


async def pooled(calls: list[Callable[[], Awaitable[Any]]]) -> float:
    """Run ``calls`` CONCURRENCY at a time; the wall time."""
    queue = list(reversed(calls))
    start = time.perf_counter()

    async def worker() -> None:
        while queue:
            await queue.pop()()

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return time.perf_counter() - start


def quantiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100)
    return cuts[49] * 1000, cuts[94] * 1000


# -- Python API ----------------------------------------------------------------


async def python_accepts(db: str, turns: int) -> float:
    local = App(db, workers=False, fire_schedules=False)
    local.agent("echo", model=ScriptedModel(["ok"]))(lambda: "Echo.")
    async with local:
        ids = [(await local.create_session("echo")).id for _ in range(SESSIONS)]
        calls = [(lambda n=n: local.send(ids[n % SESSIONS], text=f"t{n}")) for n in range(turns)]
        return turns / await pooled(calls)


async def python_latency(db: str, followers: int, events: int) -> list[float]:
    local = App(db, fire_schedules=False)
    local.agent("echo", model=ScriptedModel([lambda r: "ok"] * 10_000))(lambda: "Echo.")
    async with local:
        sid = (await local.create_session("echo")).id
        sent: dict[str, float] = {}
        samples: list[float] = []

        async def follower() -> None:
            async for event in local.follow(sid):
                if event.type == "input.received":
                    samples.append(time.perf_counter() - sent[event.data["text"]])

        tasks = [asyncio.create_task(follower()) for _ in range(followers)]
        await asyncio.sleep(0.5)  # let the followers connect (benchmark, not a test)
        for n in range(events):
            sent[f"e{n}"] = time.perf_counter()  # keyed by text: it may arrive before send returns
            receipt = await local.send(sid, text=f"e{n}")
            await local.wait(receipt.turn_id, timeout=30)
        await local.end_session(sid)
        await asyncio.wait_for(asyncio.gather(*tasks), 60)
        return samples


# -- HTTP ----------------------------------------------------------------------


class Served:
    """``turnkit serve`` on this file's App, in a subprocess."""

    def __init__(self, db: str, workers: bool) -> None:
        env = {**os.environ, "TURNKIT_BENCH_DB": db, "TURNKIT_BENCH_WORKERS": str(int(workers))}
        command = [sys.executable, "-m", "turnkit", "serve", f"{__file__}:app", "--port", "0"]
        self.proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        banner = self.proc.stdout.readline()  # type: ignore[union-attr]
        self.base = banner.split(" at ", 1)[1].split()[0]

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


async def http_accepts(db: str, turns: int) -> float:
    import httpx2

    served = Served(db, workers=False)
    try:
        async with httpx2.AsyncClient(base_url=served.base, timeout=60) as http:
            ids = []
            for _ in range(SESSIONS):
                ids.append((await http.post("/sessions", json={"agent": "echo"})).json()["id"])

            async def post(n: int) -> None:
                body = {"input": {"text": f"t{n}"}}
                response = await http.post(f"/sessions/{ids[n % SESSIONS]}/turns", json=body)
                assert response.status_code == 202, response.text

            return turns / await pooled([(lambda n=n: post(n)) for n in range(turns)])
    finally:
        served.close()


async def http_latency(db: str, followers: int, events: int) -> list[float]:
    import httpx2

    served = Served(db, workers=True)
    limits = httpx2.Limits(max_connections=followers + 10)
    try:
        async with httpx2.AsyncClient(base_url=served.base, timeout=60, limits=limits) as http:
            sid = (await http.post("/sessions", json={"agent": "echo"})).json()["id"]
            sent: dict[str, float] = {}
            samples: list[float] = []

            async def follower() -> None:
                headers = {"Accept": "text/event-stream"}
                async with http.stream("GET", f"/sessions/{sid}/events", headers=headers) as r:
                    async for line in r.aiter_lines():
                        if line.startswith("data: ") and '"input.received"' in line:
                            data = json.loads(line[6:])
                            samples.append(time.perf_counter() - sent[data["data"]["text"]])

            tasks = [asyncio.create_task(follower()) for _ in range(followers)]
            await asyncio.sleep(1.0)  # let the followers connect (benchmark, not a test)
            for n in range(events):
                sent[f"e{n}"] = time.perf_counter()
                posted = await http.post(
                    f"/sessions/{sid}/turns", json={"input": {"text": f"e{n}"}}
                )
                receipt = posted.json()
                await _until_done(http, sid, receipt["turn_id"])
            await http.post(f"/sessions/{sid}/end")
            await asyncio.wait_for(asyncio.gather(*tasks), 60)
            return samples
    finally:
        served.close()


async def _until_done(http: Any, sid: str, turn_id: str) -> None:
    while (await http.get(f"/sessions/{sid}/turns/{turn_id}")).json()["status"] in (
        "queued",
        "running",
    ):
        await asyncio.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--followers", type=int, default=100)
    parser.add_argument("--events", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:

        def db(name: str) -> str:
            return f"sqlite:///{Path(tmp) / name}.db"

        py_rate = asyncio.run(python_accepts(db("py-accept"), args.turns))
        http_rate = asyncio.run(http_accepts(db("http-accept"), args.turns))
        shape = (args.followers, args.events)
        py_lat = quantiles(asyncio.run(python_latency(db("py-follow"), *shape)))
        http_lat = quantiles(asyncio.run(http_latency(db("http-follow"), *shape)))
    print(f"{'measure':44} {'Python API':>12} {'HTTP':>12} {'HTTP/Python':>12}")
    print(
        f"{'turns accepted per second':44} {py_rate:12.0f} {http_rate:12.0f} "
        f"{http_rate / py_rate:12.2f}"
    )
    for label, index in (("p50", 0), ("p95", 1)):
        name = f"SSE delivery latency {label}, {args.followers} followers (ms)"
        print(
            f"{name:44} {py_lat[index]:12.1f} {http_lat[index]:12.1f} "
            f"{http_lat[index] / py_lat[index]:12.2f}"
        )


if __name__ == "__main__":
    main()
