"""Scale-out: turns per second with 1, 2 and 3 worker processes on one Postgres.

Run: python bench/bench_scale.py POSTGRES_ADMIN_URL [--sessions 40] [--turns 10]
(e.g. postgresql://postgres:postgres@127.0.0.1:5432/postgres; a fresh
database is created per row and dropped after).

Rows, in one run on this machine: turnkit with 1, 2, 3 ``turnkit worker``
processes on Postgres, one on SQLite, and the floor: bare DBOS workflows
(one step each) on a queue partitioned by session, in 1 process on Postgres.
A client process (``App(workers=False)``) sends SESSIONS x TURNS inputs, the
sessions side by side, with a scripted model (no network, no delay), and
waits for every turn; turns/s is inputs / (first send -> last turn's end).
Then: 2 workers, one killed with SIGKILL mid-load; the time from the kill to
the first turn that its runners resume elsewhere (lease 3 s).

This file is also the App the workers run (``turnkit worker bench_scale.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()

if os.environ.get("BENCH_DB"):  # imported by `turnkit worker`: the App
    from turnkit.sessions import App
    from turnkit.testing import ScriptedModel

    app = App(
        os.environ["BENCH_DB"],
        fire_schedules=False,
        lease_seconds=float(os.environ.get("BENCH_LEASE", "10")),
    )

    @app.agent("echo", model=ScriptedModel([lambda r: f"echo:{r.last_text}"] * 1_000_000))
    def echo() -> str:
        return "Echo."


def _sa(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


class Fresh:
    """A new Postgres database for one row, dropped afterwards."""

    def __init__(self, admin: str) -> None:
        import sqlalchemy as sa

        self.name = f"bench_scale_{uuid.uuid4().hex[:8]}"
        self.admin = sa.create_engine(_sa(admin), isolation_level="AUTOCOMMIT")
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {self.name}")
        self.url = f"{admin.rsplit('/', 1)[0]}/{self.name}"

    def drop(self) -> None:
        with self.admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")
        self.admin.dispose()


def start_worker(url: str, lease: float = 10.0) -> subprocess.Popen[str]:
    env = {**os.environ, "BENCH_DB": url, "BENCH_LEASE": str(lease)}
    env.pop("TURNKIT_EXECUTOR_ID", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "turnkit", "worker", str(HERE)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    proc.stdout.readline()  # the banner: it runs turns now
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


async def drive(url: str, sessions: int, turns: int, during: Any = None) -> tuple[float, Any]:
    """Send and wait for every turn from a client App; (turns per second, during's result)."""
    from turnkit.sessions import App

    client = App(url, workers=False, fire_schedules=False)

    @client.agent("echo", model="local")
    def echo() -> str:
        return "Echo."

    async with client:
        ids = [(await client.create_session("echo")).id for _ in range(sessions)]
        started = time.perf_counter()

        async def one(sid: str) -> list[str]:
            return [(await client.send(sid, text=f"m{m}")).turn_id or "" for m in range(turns)]

        sent = await asyncio.gather(*(one(sid) for sid in ids))
        extra = await during(client) if during is not None else None
        for turn_id in [t for session in sent for t in session]:
            await client.wait(turn_id, timeout=600)
        elapsed = time.perf_counter() - started
    return sessions * turns / elapsed, extra


def turnkit_row(admin: str, workers: int, sessions: int, turns: int) -> float:
    db = Fresh(admin)
    procs = [start_worker(db.url) for _ in range(workers)]
    try:
        rate, _ = asyncio.run(drive(db.url, sessions, turns))
    finally:
        for proc in procs:
            stop(proc)
        db.drop()
    return rate


def sqlite_row(sessions: int, turns: int) -> float:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        proc = start_worker(url)
        try:
            rate, _ = asyncio.run(drive(url, sessions, turns))
        finally:
            stop(proc)
    return rate


def kill_row(admin: str, sessions: int, turns: int) -> float:
    """Seconds from a kill -9 of one of two workers to the first turn resumed elsewhere."""
    import sqlalchemy as sa

    db = Fresh(admin)
    procs = [start_worker(db.url, lease=3.0) for _ in range(2)]
    engine = sa.create_engine(_sa(db.url))

    async def kill_one(client: Any) -> float:
        victim = procs[0]
        while True:
            with engine.connect() as conn:
                runners = [
                    row[0]
                    for row in conn.execute(
                        sa.text(
                            "SELECT w.workflow_uuid FROM dbos.workflow_status w JOIN "
                            "turnkit_executors e ON e.id = w.executor_id "
                            "WHERE e.pid = :pid AND w.status = 'PENDING'"
                        ),
                        {"pid": victim.pid},
                    )
                ]
            if runners:
                break
            await asyncio.sleep(0.02)
        os.kill(victim.pid, signal.SIGKILL)
        killed = time.time()
        while True:
            with engine.connect() as conn:
                first = conn.execute(
                    sa.text(
                        "SELECT min(ended_at) FROM turnkit_turns "
                        "WHERE workflow_id = ANY(:ids) AND ended_at > :t"
                    ),
                    {"ids": runners, "t": killed},
                ).scalar()
            if first is not None:
                return float(first) - killed
            await asyncio.sleep(0.02)

    try:
        _, recovery = asyncio.run(drive(db.url, sessions, turns, kill_one))
    finally:
        for proc in procs:
            stop(proc)
        engine.dispose()
        db.drop()
    return float(recovery)


FLOOR = """
import sys, time
from dbos import DBOS, SetEnqueueOptions
url, n, sessions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

@DBOS.step()
def model(i: int) -> str:
    return f"echo:{i}"

@DBOS.workflow()
def turn(i: int) -> str:
    return model(i)

DBOS(config={"name": "floor", "system_database_url": url, "log_level": "WARNING"})
DBOS.launch()
DBOS.register_queue(
    "floor", partition_concurrency=1, worker_concurrency=8, polling_interval_sec=0.02
)
start = time.perf_counter()
handles = []
for i in range(n):
    with SetEnqueueOptions(queue_partition_key=f"s{i % sessions}"):
        handles.append(DBOS.enqueue_workflow("floor", turn, i))
for handle in handles:
    handle.get_result()
print(n / (time.perf_counter() - start))
DBOS.destroy()
"""


def floor_row(admin: str, sessions: int, turns: int) -> float:
    db = Fresh(admin)
    try:
        out = subprocess.run(
            [sys.executable, "-c", FLOOR, db.url, str(sessions * turns), str(sessions)],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        return float(out.stdout.strip().splitlines()[-1])
    finally:
        db.drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("admin_url")
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()
    s, t = args.sessions, args.turns
    floor = floor_row(args.admin_url, s, t)
    rows = [
        (f"turnkit, {n} worker(s), Postgres", turnkit_row(args.admin_url, n, s, t))
        for n in (1, 2, 3)
    ]
    rows.append(("turnkit, 1 worker, SQLite", sqlite_row(s, t)))
    print(f"{s} sessions x {t} turns, {os.cpu_count()} cores\n")
    print(f"{'':36} {'turns/s':>8} {'vs floor':>9}")
    print(f"{'bare DBOS floor, 1 process, Postgres':36} {floor:8.1f} {1:9.2f}")
    for name, rate in rows:
        print(f"{name:36} {rate:8.1f} {rate / floor:9.2f}")
    recovery = kill_row(args.admin_url, s, t)
    print(f"\nkill -9 of one of 2 workers (lease 3 s) -> first resumed turn: {recovery:.2f} s")


if __name__ == "__main__":
    main()
