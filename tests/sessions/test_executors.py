"""Executor ids and leases: a held id is waited for, DBOS's private recovery still works,
other processes' events wake followers through LISTEN/NOTIFY (SQLite and Postgres)."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import dbos
import pytest
import sqlalchemy as sa

from sessions.crash_app import build
from sessions.scale_procs import Proc
from sessions.test_sessions_crash import Child
from turnkit.sessions import App
from turnkit.sessions.db import executors as leases
from turnkit.sessions.db import schema
from turnkit.sessions.db.engines import Databases
from turnkit.sessions.db.executors import Holder, LeaseLost
from turnkit.sessions.db.store import Tx
from turnkit.sessions.runtime.executors import (
    ExecutorIdInUseError,
    ExecutorLease,
    recover_workflows_of,
)
from turnkit.testing import ScriptedModel


def test_dbos_is_pinned_to_the_version_whose_private_recovery_is_wrapped() -> None:
    assert dbos.__version__.startswith("3.4.") if hasattr(dbos, "__version__") else True
    from importlib.metadata import version

    assert version("dbos").startswith("3.4."), "re-check recover_workflows_of on a new DBOS"


def test_an_unset_executor_id_is_unique_per_app_and_env_wins(monkeypatch) -> None:
    monkeypatch.delenv("TURNKIT_EXECUTOR_ID", raising=False)
    assert App("sqlite:///x.db").executor_id != App("sqlite:///x.db").executor_id
    monkeypatch.setenv("TURNKIT_EXECUTOR_ID", "from-env")
    assert App("sqlite:///x.db").executor_id == "from-env"
    with pytest.raises(ValueError, match="executor_id"):
        App("sqlite:///x.db", executor_id="has space")


async def test_recovering_a_dead_executors_workflows_resumes_its_turn_here(tmp_path: Path) -> None:
    """The one wrapper of DBOS._recover_pending_workflows: fails if an upgrade breaks it."""
    db = tmp_path / "crash.db"
    child = Child(db, "tool")  # executor "child": a turn blocked in a tool, then kill -9
    (turn_id,) = json.loads(child.line())
    assert child.line() == "tool started"
    child.kill()
    model = ScriptedModel(["Resumed elsewhere."])
    app = build(str(db), db.with_suffix(".marker"), False, model, False, lease_seconds=600)
    async with app:  # another id; the child's lease (2 s) has not lapsed yet
        assert app.executor_id != "child"
        assert recover_workflows_of(["child"]) == 1
        turn = await app.wait(turn_id, timeout=30)
        assert recover_workflows_of(["child"]) == 0  # nothing twice
    assert turn.status == "completed" and turn.output == "Resumed elsewhere."


async def test_a_held_id_is_waited_for_then_its_turns_resume(
    any_db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    worker = Proc("worker", any_db_url, tmp_path, executor_id="same", SCALE_LEASE="3")
    worker.kill()
    app = App(any_db_url, executor_id="same", lease_seconds=3, fire_schedules=False)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, "turnkit.sessions"):
        async with app:
            waited = time.monotonic() - started
            (info,) = [e for e in await app.executors() if e.id == "same"]
    assert "is held by" in caplog.text and waited > 0.5
    assert info.state == "live" and info.runs_turns


async def test_a_live_holder_of_the_id_is_named_not_shared(any_db_url: str, tmp_path: Path) -> None:
    worker = Proc("worker", any_db_url, tmp_path, executor_id="taken", SCALE_LEASE="3")
    app = App(any_db_url, executor_id="taken", lease_seconds=3, fire_schedules=False)
    try:
        with pytest.raises(ExecutorIdInUseError, match="held by a live process"):
            await app.start()
    finally:
        if app.started:
            await app.stop()
        worker.stop()


async def test_followers_see_another_processes_events_within_100_ms(
    postgres_url: str, tmp_path: Path
) -> None:
    worker = Proc("worker", postgres_url, tmp_path, SCALE_DELAY="0.01")
    try:
        app = App(postgres_url, workers=False, fire_schedules=False)

        @app.agent("echo", model="local")
        def echo() -> str:
            return "Echo."

        async with app:
            assert app.runtime.listener is not None and app.runtime.listener.connected.wait(10)
            session = await app.create_session("echo")
            lags = []
            for i in range(10):
                receipt = await app.send(session.id, text=f"x-m{i}")
                async for event in app.follow(session.id, after=0):
                    if event.turn_id == receipt.turn_id and event.type == "turn.completed":
                        lags.append(time.time() - event.timestamp.timestamp())
                        break
    finally:
        worker.stop()
    lags.sort()
    print(f"\nfollow lag across processes: median {lags[5]:.3f} s, max {lags[-1]:.3f} s")
    assert lags[5] < 0.1


async def test_a_runner_of_an_earlier_holder_is_refused_without_losing_the_id_again(
    tmp_path: Path,
) -> None:
    """Fencing: after a takeover the process holds its id again under a new holder; a
    runner of the old holder is refused, and that refusal leaves the new hold alone."""
    databases = Databases(f"sqlite:///{tmp_path / 'fence.db'}")
    try:
        schema.migrate(databases.write)
        lease = ExecutorLease(databases.write, "stalls", 60, True, 1)
        lease.acquire()
        await lease.admit()  # this task is now a runner of the first holder

        def write() -> None:
            with databases.write.begin() as conn:
                lease.fence(Tx(conn, None))  # type: ignore[arg-type]

        write()  # allowed while the lease is held
        with databases.write.begin() as conn:  # it lapses, and another process takes it
            conn.execute(sa.text("UPDATE turnkit_executors SET lease_until = 0"))
        taker = Holder("taker", "t", "host", 1, True, 1)
        assert leases.claim_lapsed(databases.write, taker, 60) == ["stalls"]
        assert leases.mark_taken(databases.write, "stalls", taker)
        with pytest.raises(LeaseLost):
            write()  # the stalled runner's next write
        assert not lease.live
        lease._hold_again()  # the lease thread's next beat: the id is held again
        assert lease.live
        with pytest.raises(LeaseLost):
            write()  # still the old holder's runner: refused
        assert lease.live  # and the process keeps its new hold
    finally:
        databases.dispose()
