"""Runners no process could start at once: they wait in turnkit's table, not on a DBOS queue."""

from __future__ import annotations

import asyncio
import threading

import pytest
import sqlalchemy as sa

from sessions.echo_support import echo_app
from turnkit.sessions import App
from turnkit.sessions.db import schema
from turnkit.sessions.runtime import lingering
from turnkit.testing import ScriptedModel


def waiting_rows(app: App) -> list[tuple[str, str]]:
    with app.runtime.databases.read.connect() as conn:
        rows = conn.execute(sa.select(schema.waiting_runners)).all()
    return [(row.session_id, row.runner_id) for row in rows]


async def test_a_lingering_runner_gives_its_slot_up_at_once_to_a_waiting_one(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A runner would keep its idle session for half a minute: only its eviction
    # lets the other session's turn start within the wait below.
    monkeypatch.setattr(lingering, "RUNNER_LINGER_S", 30.0)
    app = echo_app(db_url, max_running=1, polling_interval=60.0)
    async with app:
        first, second = [await app.create_session("echo") for _ in range(2)]
        done = await app.wait((await app.send(first.id, text="a")).turn_id, timeout=10)
        assert done.output == "echo:a"  # its runner now lingers, holding the one slot
        turn = await app.wait((await app.send(second.id, text="b")).turn_id, timeout=10)
        assert turn.output == "echo:b"
        assert waiting_rows(app) == []
        # The first session's runner gave it up: its next input names a new one.
        again = await app.wait((await app.send(first.id, text="c")).turn_id, timeout=10)
        assert again.output == "echo:c"


async def test_a_process_without_workers_leaves_runners_waiting_for_one_with_them(
    db_url: str,
) -> None:
    sender = echo_app(db_url, workers=False)
    async with sender:
        session = await sender.create_session("echo")
        receipts = [await sender.send(session.id, text=f"m{i}") for i in range(3)]
        (waiting,) = waiting_rows(sender)
        assert waiting[0] == session.id
    worker = echo_app(db_url)
    async with worker:
        turns = [await worker.wait(r.turn_id, timeout=10) for r in receipts]
        assert waiting_rows(worker) == []
    assert [t.output for t in turns] == ["echo:m0", "echo:m1", "echo:m2"]


async def test_runners_left_on_the_old_dbos_queue_still_run_and_the_queue_is_retired(
    db_url: str,
) -> None:
    from dbos import DBOSClient

    from turnkit.sessions.runtime.dispatch import APP_VERSION, QUEUE, WORKFLOW

    # What an earlier turnkit left: a runner enqueued on its partitioned DBOS queue.
    sender = echo_app(db_url, workers=False)
    async with sender:
        session = await sender.create_session("echo")
        receipt = await sender.send(session.id, text="old")
        ((_, runner_id),) = waiting_rows(sender)
        with sender.runtime.databases.write.begin() as conn:
            conn.execute(schema.waiting_runners.delete())
        databases = sender.runtime.databases
        client = DBOSClient(
            system_database_url=None if databases.dbos is not None else databases.url,
            system_database_engine=databases.dbos,
            application_name="turnkit",
        )
        try:
            client.register_queue(QUEUE, partition_concurrency=1, polling_interval_sec=0.05)
            options: dict[str, object] = {
                "workflow_name": WORKFLOW,
                "queue_name": QUEUE,
                "workflow_id": runner_id,
                "queue_partition_key": session.id,
                "app_version": APP_VERSION,
            }
            client.enqueue(options, session.id)  # type: ignore[arg-type]
        finally:
            client.destroy()

    worker = echo_app(db_url)
    async with worker:
        turn = await worker.wait(receipt.turn_id, timeout=10)
        client = worker.runtime.dispatcher.client
        assert client is not None and client.retrieve_queue(QUEUE) is not None  # not yet
    assert turn.output == "echo:old"
    async with worker:  # drained: the next start retires the queue
        client = worker.runtime.dispatcher.client
        assert client is not None and client.retrieve_queue(QUEUE) is None


async def test_a_full_process_takes_its_waiting_runners_when_its_slot_frees_in_order(
    db_url: str,
) -> None:
    release = threading.Event()
    order: list[str] = []

    async def slow(request: object) -> str:
        order.append(request.last_text)  # type: ignore[attr-defined]
        if request.last_text == "first":  # type: ignore[attr-defined]
            await asyncio.to_thread(release.wait, 10)
        return "done"

    app = App(db_url, max_running=1, polling_interval=60.0)

    @app.agent("slow", model=ScriptedModel([slow] * 10))
    def agent() -> str:
        return "Slow."

    async with app:
        sessions = [await app.create_session("slow") for _ in range(4)]
        receipts = [await app.send(sessions[0].id, text="first")]
        while not order:
            await asyncio.sleep(0.01)
        for i, session in enumerate(sessions[1:], start=1):
            receipts.append(await app.send(session.id, text=f"s{i}"))
        assert sorted(sid for sid, _ in waiting_rows(app)) == sorted(s.id for s in sessions[1:])
        assert (await app.get_turn(receipts[1].turn_id)).status == "queued"
        release.set()  # a poll would come after a minute: only the freed slot starts them
        turns = [await app.wait(r.turn_id, timeout=10) for r in receipts]
        assert waiting_rows(app) == []
    assert turns[1].started_at >= turns[0].ended_at
    assert [t.status for t in turns] == ["completed"] * 4
    assert order == ["first", "s1", "s2", "s3"]


async def test_a_lingering_runner_is_handed_the_next_turn_by_the_send_that_queues_it(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lingering, "RUNNER_LINGER_S", 30.0)  # it is surely still lingering
    app = echo_app(db_url)
    async with app:
        session = await app.create_session("echo")
        await app.wait((await app.send(session.id, text="a")).turn_id, timeout=10)
        receipt = await app.send(session.id, text="b")
        # Started in the transaction that queued it: running (or done) as send returns.
        assert (await app.get_turn(receipt.turn_id)).status in ("running", "completed")
        turn = await app.wait(receipt.turn_id, timeout=10)
        events = [e.type for e in await app.events(session.id) if e.turn_id == turn.id]
    assert turn.output == "echo:b"
    assert events == ["input.received", "turn.started", "message", "message", "turn.completed"]


async def test_a_hand_over_that_fails_leaves_the_turn_to_its_runner(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from turnkit.sessions.db.steps import Journal

    monkeypatch.setattr(lingering, "RUNNER_LINGER_S", 30.0)
    app = echo_app(db_url)
    async with app:
        session = await app.create_session("echo")
        await app.wait((await app.send(session.id, text="a")).turn_id, timeout=10)

        def refuse(self: Journal, tx: object, session_id: str, runner_id: str) -> None:
            raise RuntimeError("the claim was refused")

        monkeypatch.setattr(Journal, "claim_in", refuse)
        receipt = await app.send(session.id, text="b")  # the input is stored all the same
        turn = await app.wait(receipt.turn_id, timeout=10)
        history = await app.history(session.id)
    assert turn.output == "echo:b"
    assert [m.text for m in history] == ["a", "echo:a", "b", "echo:b"]
