"""A worker that stalls past its lease: its turns are taken over, and when it comes
back it writes nothing more of them (fencing), then runs turns again under its id.

Real ``turnkit worker`` processes on one database, SQLite and Postgres
(stall_app.py), stalled with SIGSTOP and resumed with SIGCONT by pid; the test
process is a client App.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from sessions.scale_procs import Proc, client, count

STALL_APP = Path(__file__).with_name("stall_app.py")
LEASE_S = 1.5


def marks(marker: Path, kind: str) -> list[tuple[str, str]]:
    """(executor, detail) of each line of ``kind`` the workers wrote."""
    if not marker.exists():
        return []
    lines = [line.split("\t") for line in marker.read_text().splitlines()]
    return [(executor, detail) for what, executor, detail in lines if what == kind]


async def until(what: str, check: Callable[[], object], procs: Iterable[Proc] = ()) -> None:
    """Wait (at most 30 s) until ``check()``; else fail with the workers' logs."""
    deadline = time.monotonic() + 30.0
    while not check():
        if time.monotonic() > deadline:
            logs = "\n".join(f"{p.executor_id}: {p.log.read_text()[-3000:]}" for p in procs)
            raise AssertionError(f"waited 30 s for {what}\n{logs}")
        await asyncio.sleep(0.02)


async def pause_outside_a_write(proc: Proc, url: str) -> None:
    """Stall ``proc``, at a moment it is not inside a write transaction on SQLite.

    A process stopped inside one keeps SQLite's one write lock, and then no
    process can write at all, the takeover included: no lease can fence that
    on SQLite. The test is of a worker stalled between writes (a tool running),
    so a stop that lands inside one (a lease renewal, say) is undone and tried
    again a moment later.
    """
    for _ in range(100):
        proc.pause()
        if not url.startswith("sqlite"):
            return
        probe = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=0.2)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.rollback()
            return
        except sqlite3.OperationalError:
            proc.resume()
            await asyncio.sleep(0.01)
        finally:
            probe.close()
    raise AssertionError("the worker was inside a write each time it was stopped")


async def test_a_stalled_worker_writes_nothing_of_the_turns_taken_from_it(
    any_db_url: str, tmp_path: Path
) -> None:
    marker, releases = tmp_path / "marks.txt", tmp_path / "releases"
    releases.mkdir()
    env = {"STALL_MARKER": str(marker), "STALL_DIR": str(releases), "SCALE_LEASE": str(LEASE_S)}
    workers = {
        p.executor_id: p
        for p in (Proc("worker", any_db_url, tmp_path, app=STALL_APP, **env) for _ in range(2))
    }
    try:
        async with client(any_db_url, "stall") as app:
            session = await app.create_session("stall", key="one")
            receipt = await app.send(session.id, text="go")
            await until("h1 to start", lambda: marks(marker, "start"), workers.values())
            [(stalled_id, call)] = marks(marker, "start")
            assert call == "h1"
            stalled = workers[stalled_id]
            [other_id] = set(workers) - {stalled_id}
            await pause_outside_a_write(stalled, any_db_url)
            # The other worker takes the turn over once the lease lapses: h1 was in
            # flight (answered as interrupted), and it runs h2 itself.
            await until(
                "the takeover's h2",
                lambda: (other_id, "h2") in marks(marker, "start"),
                workers.values(),
            )
            models_before = marks(marker, "model")
            stalled.resume()
            (releases / f"release-{stalled_id}-h1").touch()  # the stalled copy's h1 returns
            ended = "SELECT count(*) FROM turnkit_turns WHERE status <> 'running'"
            await until(  # unfenced, it would go on: h2 "interrupted", and end the turn
                "the stalled runner to stop",
                lambda: (
                    "its session was taken over" in stalled.log.read_text()
                    or count(any_db_url, ended)
                ),
            )
            (releases / f"release-{other_id}-h2").touch()
            turn = await app.wait(receipt.turn_id or "", timeout=30)
            events = await app.events(session.id)
            models_after = marks(marker, "model")
            # Back under its id (a new holder), the stalled worker runs turns again.
            workers[other_id].stop()
            again = await app.send((await app.create_session("stall", key="two")).id, text="go")
            # (its h1 goes on at once: that release is the stalled copy's, made above)
            await until("the new turn's first hold", lambda: len(marks(marker, "start")) > 2)
            runs_again = marks(marker, "start")[2][0]
            for call in ("h1", "h2"):
                (releases / f"release-{runs_again}-{call}").touch()
            second = await app.wait(again.turn_id or "", timeout=30)
    finally:
        for proc in workers.values():
            proc.resume()
            proc.stop()
    assert turn.status == "completed", (turn.reason, turn.error)
    assert turn.output == f"done:ran:{other_id}"  # h2's own result, not an "interrupted"
    finished = [e.data for e in events if e.type == "tool.finished"]
    assert [(d["id"], d["is_error"]) for d in finished] == [("h1", True), ("h2", False)]
    assert [e.type for e in events].count("turn.completed") == 1
    # The stalled copy made no model call after it came back (its writes were refused).
    assert models_after[len(models_before) :] == [(other_id, "5")]
    assert runs_again == stalled_id and second.status == "completed"
    assert second.output == f"done:ran:{stalled_id}"
    assert count(any_db_url, "SELECT count(*) FROM turnkit_turns WHERE status = 'running'") == 0
