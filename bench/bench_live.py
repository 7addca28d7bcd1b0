"""Live output: time to first delta and per-delta delay, vs the model read directly.

Run: python bench/bench_live.py [--pieces N] [--followers N] [--turns N]

One streaming scripted model (:class:`turnkit.testing.StreamingScriptedModel`,
4 characters a piece, a piece every 25 ms, so coalescing never merges two)
is read four ways in one run, each on a fresh SQLite database (WAL). Each
App runs a first turn to warm up, then N measured turns (``--turns``, 5):
the first delta is the median over them, the per-delta delays are pooled.

- floor: ``model.stream()`` iterated directly, in this process.
- ``app.follow(session, live=True)``: the App runs the turn in this process
  and the follower reads it here (the path of an in-process chat UI). It
  follows before the turn is sent, as the SSE rows' streams do.
- SSE, 1 follower: ``turnkit.server.create_app`` served by uvicorn in a
  subprocess (``--serve``) on 127.0.0.1; this process reads
  ``GET /sessions/{id}/events?live=true`` over a plain socket, stamping each
  read with the kernel's receive time (``SO_TIMESTAMPNS``) and with the time
  this process read it, and parsing the SSE lines afterwards.
- SSE, F followers: the same server subprocess, F such sockets on one turn.
- bare sockets, 1 and F followers: no turnkit, no ASGI: a uvloop server
  subprocess (``--serve-bare``) that writes the same SSE delta chunk to
  each of its F connections in one loop step, a piece every 25 ms, read by
  the same clients. It is the floor of a fan-out on this machine: what F
  sends cost when the bytes are already there.

Times: the model records when its call began and when it yielded each piece
(``time.perf_counter``, CLOCK_MONOTONIC: one clock for every process on the
machine; the server reports its model's times over a bench-only route).
Time to first delta: from the model call's start to the first delta read by
the follower (for SSE: received on the client's socket, by the kernel's
clock read back onto the monotonic one). Each follower is subscribed, and
has had 50 ms to read what came before, when the turn is sent (a chat page
follows its session before its user types). Per-delta delay:
from the model yielding piece i to the follower receiving delta i (every
piece is one delta at this pace). F followers: each measured turn has F
new followers; the first delta is the median over all followers and turns,
the delays are pooled. Goals: the first delta within 5 ms of the floor; F
SSE followers under 2x one follower's median delay. The delay columns are by
the kernel's receive times: with F sockets in one process, the times this
process read them (the "read" columns) add its own queue, which F clients on
their own machines would not have (one process reads a hundred sockets one
after another, and on a busy machine it waits for a core besides). The
last lines compare what F-1 more followers add to the median delay through
turnkit with what they add to the bare sockets' (a send to a socket whose
reader is on the same machine costs several microseconds here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from turnkit.providers.base import ModelRequest
from turnkit.sessions import App, LiveEvent
from turnkit.testing import StreamingScriptedModel

CHUNK = 4
DELAY = 0.025

Delays = tuple[float, list[float]]


def text_of(pieces: int) -> str:
    return ("word" * pieces)[: pieces * CHUNK]


def model_for(pieces: int, rounds: int) -> StreamingScriptedModel:
    return StreamingScriptedModel([text_of(pieces)] * rounds, chunk=CHUNK, delay=DELAY)


def delays(call_at: float, piece_times: list[float], got: list[tuple[int, float]]) -> Delays:
    """Time to first delta, and each delta's delay (ms), from (index, read at) pairs
    against the last call's start and piece times."""
    first = (got[0][1] - call_at) * 1000 if got else float("nan")
    return first, [(at - piece_times[i]) * 1000 for i, at in got if i < len(piece_times)]


async def floor(pieces: int, turns: int) -> list[Delays]:
    model = model_for(pieces, turns)
    results = []
    for _ in range(turns):
        got = []
        async for event in model.stream(ModelRequest(())):
            if event.type == "text_delta":
                got.append((len(got), time.perf_counter()))
        results.append(delays(model.call_times[-1], model.piece_times[-pieces:], got))
    return results


def live_app(db: Path, model: StreamingScriptedModel) -> App:
    app = App(f"sqlite:///{db}", fire_schedules=False)
    app.agent("writer", model=model)(lambda: "Write.")
    return app


async def through_follow(db: Path, pieces: int, turns: int) -> list[Delays]:
    model = model_for(pieces, 1 + turns)
    app = live_app(db, model)
    results = []
    async with app:
        session = await app.create_session("writer")
        for turn in range(1 + turns):  # the first turn warms the App up
            got: list[tuple[int, float]] = []
            follower = app.follow(session.id, after=len(await app.events(session.id)), live=True)

            async def read(follower: Any = follower, got: list[tuple[int, float]] = got) -> None:
                async for item in follower:
                    if isinstance(item, LiveEvent):
                        got.append((item.index, time.perf_counter()))
                    elif item.type == "turn.completed":
                        break
                await follower.aclose()

            reading = asyncio.ensure_future(read())
            while not app.runtime.live.followers:
                await asyncio.sleep(0.01)  # subscribed, as the SSE rows' streams are
            await asyncio.sleep(0.05)  # and done reading what came before
            await app.send(session.id, text="Go")
            await reading
            if turn:
                results.append(delays(model.call_times[-1], model.piece_times[-pieces:], got))
    return results


# -- the server subprocess ------------------------------------------------------------


def serve(db: Path, pieces: int, turns: int) -> None:
    """The SSE rows' server: the App and uvicorn, with bench-only routes for the
    model's times, the number of live followers, and waiting for a turn."""
    import uvicorn

    from turnkit.server import create_app

    model = model_for(pieces, 1 + turns)
    app = live_app(db, model)
    api = create_app(app, None)

    @api.get("/bench/times")
    async def times() -> dict[str, Any]:
        return {"call": model.call_times, "pieces": model.piece_times}

    @api.get("/bench/followers")
    async def followers() -> int:
        return int(app.runtime.live.followers)

    @api.get("/bench/wait/{turn_id}")
    async def wait(turn_id: str) -> str:
        await app.wait(turn_id, timeout=60)
        return "done"

    sock = socket.create_server(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(api, log_level="error", timeout_graceful_shutdown=2)
    uvicorn.Server(config).run(sockets=[sock])


def serve_bare(pieces: int) -> None:
    """The bare sockets' server: each connection gets chunked SSE headers at once;
    ``GET /go?n=N`` waits for N of them, then writes every piece to all of them in
    one loop step each and answers with the pieces' times."""
    import uvloop

    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    streams: list[asyncio.Transport] = []

    def chunk(data: bytes) -> bytes:
        return b"%x\r\n%b\r\n" % (len(data), data)

    async def fan_out(n: int) -> list[float]:
        while len(streams) < n:
            await asyncio.sleep(0.01)
        times = []
        for index in range(pieces):
            await asyncio.sleep(DELAY)
            data = json.dumps({"type": "text.delta", "index": index, "text": "word"})
            framed = chunk(f"event: text.delta\ndata: {data}\n\n".encode())
            times.append(time.perf_counter())
            for transport in streams:
                transport.write(framed)
        for transport in streams:
            transport.write(chunk(b"event: turn.completed\ndata: {}\n\n") + b"0\r\n\r\n")
            transport.close()
        streams.clear()
        return times

    class Stream(asyncio.Protocol):
        def connection_made(self, transport: Any) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            if data.startswith(b"GET /go?n="):
                self.going = asyncio.ensure_future(self.go(int(data[10:].split(b" ", 1)[0])))
            else:
                self.transport.write(head)
                streams.append(self.transport)

        async def go(self, n: int) -> None:
            body = json.dumps(await fan_out(n)).encode()
            self.transport.write(
                b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%b" % (len(body), body)
            )
            self.transport.close()

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Stream, "127.0.0.1", 0)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    uvloop.run(main())


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux


def realtime_offset() -> float:
    """CLOCK_REALTIME minus perf_counter's clock (CLOCK_MONOTONIC), read tightly."""
    best = (float("inf"), 0.0)
    for _ in range(50):
        before = time.perf_counter()
        real = time.time()
        after = time.perf_counter()
        best = min(best, (after - before, real - (before + after) / 2))
    return best[1]


class SSEClient:
    """One ``GET .../events?live=true`` on a plain socket. Each read is stamped twice:
    when the kernel received it (``SO_TIMESTAMPNS``: the delivery, whatever this
    process is busy with) and when this loop read it; the lines are parsed after."""

    def __init__(self, request: bytes, port: int, offset: float) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.sock.sendall(request)
        self.sock.setblocking(False)
        self.offset = offset
        self.reads: list[tuple[float, float, bytes]] = []  # (received, read, data)
        loop = asyncio.get_running_loop()
        self.started = loop.create_future()
        self.done = loop.create_future()
        loop.add_reader(self.sock, self._readable)

    def _readable(self) -> None:
        while True:
            try:
                data, ancillary, _, _ = self.sock.recvmsg(65536, 64)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            read = time.perf_counter()
            received = read
            for level, kind, raw in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    seconds, nanoseconds = struct.unpack("qq", raw[:16])
                    received = seconds + nanoseconds / 1e9 - self.offset
            if data:
                self.reads.append((received, read, data))
                if not self.started.done():
                    self.started.set_result(None)
            if (not data or b"event: turn.completed" in data) and not self.done.done():
                self.done.set_result(None)
            if not data:
                self.close()
                return

    def close(self) -> None:
        if self.sock.fileno() >= 0:
            asyncio.get_running_loop().remove_reader(self.sock)
            self.sock.close()

    def deltas(self, when: int = 0) -> list[tuple[int, float]]:
        """(index, received at) of each text delta (the read that completes its line);
        ``when=1``: read at instead."""
        got, buffer, event = [], b"", None
        for *stamps, data in self.reads:
            buffer += data
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                line = raw.rstrip(b"\r")
                if line.startswith(b"event: "):
                    event = line[7:]
                elif line.startswith(b"data: ") and event == b"text.delta":
                    got.append((json.loads(line[6:])["index"], stamps[when]))
        return got


async def through_sse(
    db: Path, pieces: int, followers: int, turns: int
) -> tuple[list[Delays], list[Delays]]:
    """Each measured turn's followers' (first delta, delays): by the kernel's receive
    times, and by the times this process read them."""
    import httpx2

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    args = [sys.executable, __file__, "--serve", str(db), "--pieces", str(pieces)]
    server = subprocess.Popen([*args, "--turns", str(turns)], stdout=subprocess.PIPE, env=env)
    received: list[Delays] = []
    read: list[Delays] = []
    try:
        assert server.stdout is not None
        port = int(await asyncio.to_thread(server.stdout.readline))
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            while True:
                try:
                    await http.get("/healthz")
                    break
                except httpx2.TransportError:
                    await asyncio.sleep(0.05)
            sid = (await http.post("/sessions", json={"agent": "writer"})).json()["id"]
            warm = await http.post(f"/sessions/{sid}/turns", json={"input": {"text": "Warm"}})
            await http.get(f"/bench/wait/{warm.json()['turn_id']}")  # the first turn warms up
            for _ in range(turns):
                clients = await _sse_turn(http, port, sid, followers)
                times = (await http.get("/bench/times")).json()
                call_at, piece_times = times["call"][-1], times["pieces"][-pieces:]
                for client in clients:
                    received.append(delays(call_at, piece_times, client.deltas()))
                    read.append(delays(call_at, piece_times, client.deltas(when=1)))
    finally:
        server.terminate()
        await asyncio.to_thread(server.wait, 10)
    return received, read


async def _sse_turn(http: Any, port: int, sid: str, followers: int) -> list[SSEClient]:
    """One turn followed by ``followers`` new SSE streams, read to its end."""
    after = len((await http.get(f"/sessions/{sid}/events")).json())
    request = (
        f"GET /sessions/{sid}/events?live=true&after={after} HTTP/1.1\r\n"
        f"Host: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n"
    ).encode()
    offset = realtime_offset()
    clients = [SSEClient(request, port, offset) for _ in range(followers)]
    await asyncio.gather(*(c.started for c in clients))
    while (await http.get("/bench/followers")).json() < followers:
        await asyncio.sleep(0.01)  # every stream subscribed
    await asyncio.sleep(0.05)  # and done reading what came before
    await http.post(f"/sessions/{sid}/turns", json={"input": {"text": "Go"}})
    await asyncio.wait_for(asyncio.gather(*(c.done for c in clients)), 60)
    for client in clients:
        client.close()
    while (await http.get("/bench/followers")).json():
        await asyncio.sleep(0.01)  # every stream gone
    return clients


async def through_bare(pieces: int, followers: int, turns: int) -> list[Delays]:
    """Each round's followers' (first delta, delays) from the bare sockets' server."""
    import httpx2

    args = [sys.executable, __file__, "--serve-bare", "--pieces", str(pieces)]
    server = subprocess.Popen(args, stdout=subprocess.PIPE)
    received: list[Delays] = []
    try:
        assert server.stdout is not None
        port = int(await asyncio.to_thread(server.stdout.readline))
        request = f"GET /events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
        async with httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            for turn in range(1 + turns):  # the first round warms up
                offset = realtime_offset()
                clients = [SSEClient(request, port, offset) for _ in range(followers)]
                await asyncio.gather(*(c.started for c in clients))
                piece_times = (await http.get(f"/go?n={followers}")).json()
                await asyncio.wait_for(asyncio.gather(*(c.done for c in clients)), 60)
                for client in clients:
                    client.close()
                    if turn:
                        received.append(delays(piece_times[0], piece_times, client.deltas()))
    finally:
        server.terminate()
        await asyncio.to_thread(server.wait, 10)
    return received


def p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def row(results: list[Delays]) -> Delays:
    """The median first delta, and every delay."""
    return statistics.median(f for f, _ in results), [d for _, ds in results for d in ds]


async def main(pieces: int, followers: int, turns: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bench_live_"))
    rows = [("floor: model.stream()", row(await floor(pieces, turns)), None)]
    rows.append(("follow(live=True)", row(await through_follow(tmp / "f.db", pieces, turns)), None))
    one_received, one_read = await through_sse(tmp / "s1.db", pieces, 1, turns)
    one, one_r = row(one_received), row(one_read)
    rows.append(("SSE ?live=true, 1 follower", one, one_r))
    many_received, many_read = await through_sse(tmp / "sn.db", pieces, followers, turns)
    many, many_r = row(many_received), row(many_read)
    rows.append((f"SSE ?live=true, {followers} followers", many, many_r))
    bare_one = row(await through_bare(pieces, 1, turns))
    bare_many = row(await through_bare(pieces, followers, turns))
    received = sum(len(ds) for _, ds in many_received)
    base_first = rows[0][1][0]
    print(
        f"{pieces} deltas of {CHUNK} chars, one every {DELAY * 1000:.0f} ms (SQLite, WAL); "
        f"{turns} measured turns a row"
    )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    header = (
        f"{'path':<34}{'first delta ms':>15}{'vs floor ms':>12}{'delay p50':>11}{'p95':>8}"
        f"{'read p50':>10}{'p95':>8}"
    )
    print(header)
    print("-" * len(header))
    for name, (first, ds), read in rows:
        extra = first - base_first
        line = f"{name:<34}{first:>15.2f}{extra:>+12.2f}{p(ds, 0.5):>11.2f}{p(ds, 0.95):>8.2f}"
        if read is not None:
            line += f"{p(read[1], 0.5):>10.2f}{p(read[1], 0.95):>8.2f}"
        print(line)
    for name, (_, ds) in (
        ("bare sockets, 1 follower", bare_one),
        (f"bare sockets, {followers} followers", bare_many),
    ):
        print(f"{name:<34}{'':>15}{'':>12}{p(ds, 0.5):>11.2f}{p(ds, 0.95):>8.2f}")
    ratio = p(many[1], 0.5) / max(p(one[1], 0.5), 1e-9)
    read_ratio = p(many_r[1], 0.5) / max(p(one_r[1], 0.5), 1e-9)
    print(f"\n{followers} SSE followers received {received} of {followers * pieces * turns} deltas")
    bare_ratio = p(bare_many[1], 0.5) / max(p(bare_one[1], 0.5), 1e-9)
    print(
        f"{followers} SSE followers / 1 follower, median per-delta delay: {ratio:.2f}x "
        f"(bare sockets: {bare_ratio:.1f}x)"
    )
    print(f"  (by the times this process read them: {read_ratio:.2f}x)")
    added = p(many[1], 0.5) - p(one[1], 0.5)
    bare_added = p(bare_many[1], 0.5) - p(bare_one[1], 0.5)
    print(
        f"{followers - 1} more followers add to the median delay: {added:.2f} ms through "
        f"turnkit, {bare_added:.2f} ms on bare sockets ({added / max(bare_added, 1e-9):.2f}x)"
    )
    print(f"first delta through follow(live=True) vs floor: {rows[1][1][0] - base_first:+.2f} ms")
    print(f"first delta through SSE (1 follower) vs floor: {one[0] - base_first:+.2f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pieces", type=int, default=40)
    parser.add_argument("--followers", type=int, default=100)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--serve", metavar="DB", help=argparse.SUPPRESS)
    parser.add_argument("--serve-bare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_bare:
        serve_bare(args.pieces)
    elif args.serve:
        serve(Path(args.serve), args.pieces, args.turns)
    else:
        asyncio.run(main(args.pieces, args.followers, args.turns))
