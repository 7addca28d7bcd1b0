"""Followers in one process: what it just committed comes from memory, exactly as the log
has it, and followers woken together share one read of the log."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from turnkit.sessions import App, Event
from turnkit.sessions.db.store import CommittedEvent
from turnkit.sessions.runtime.recent_events import MAX_DATA, RecentEvents
from turnkit.sessions.runtime.shared_reads import SharedReads
from turnkit.testing import ScriptedModel, StreamingScriptedModel

TIMEOUT = 20


async def test_followers_get_the_logs_events_and_most_without_reading_it(
    any_db_url: str, monkeypatch: Any
) -> None:
    long_reply = "x" * (MAX_DATA + 10)  # too large to keep: read from the log
    app = App(any_db_url, fire_schedules=False)
    replies = ["one", long_reply, "three", "four", "five"]
    app.agent("echo", model=ScriptedModel(replies))(lambda: "Echo.")
    async with app:
        store = app.runtime.store
        found = 0  # reads of the log that found events
        read_rows = store.event_rows

        def counted(*args: Any) -> Any:
            nonlocal found
            rows = read_rows(*args)
            found += bool(rows)
            return rows

        monkeypatch.setattr(store, "event_rows", counted)
        session = await app.create_session("echo")
        got: list[Event] = []

        async def follow() -> None:
            ended = 0
            async for event in app.follow(session.id):
                got.append(event)
                ended += event.type == "turn.completed"
                if ended == len(replies):
                    return

        follower = asyncio.ensure_future(follow())
        await asyncio.sleep(0.1)  # it follows before the first input comes
        for text in "abcde":
            receipt = await app.send(session.id, text=text)
            await app.wait(receipt.turn_id, timeout=TIMEOUT)
        await asyncio.wait_for(follower, TIMEOUT)
        monkeypatch.undo()
        log = await app.events(session.id)
    assert [e.to_dict() for e in got] == [e.to_dict() for e in log]
    messages = [e.data["message"] for e in got if e.type == "message"]
    assert messages[3]["content"][0]["text"] == long_reply
    # the long reply's read (and at most one more, if a recheck's timeout fell between
    # a commit and its hand-over); without memory, each turn's events are a read
    assert found <= 2


async def test_a_follower_ends_soon_after_its_session_ends_mid_turn(any_db_url: str) -> None:
    # Its last events come from memory; the turn's end still has it look for the end.
    hold = threading.Event()
    model = StreamingScriptedModel(["a slow reply"], chunk=2, hold=hold, hold_after=1)
    app = App(any_db_url, fire_schedules=False)
    app.agent("slow", model=model)(lambda: "Slow.")
    async with app:
        session = await app.create_session("slow")
        got: list[str] = []
        started = asyncio.Event()

        async def follow() -> None:
            async for event in app.follow(session.id):
                got.append(event.type)
                if event.type == "turn.started":
                    started.set()

        follower = asyncio.ensure_future(follow())
        await app.send(session.id, text="Go")
        await asyncio.wait_for(started.wait(), TIMEOUT)
        await app.end_session(session.id)
        hold.set()
        await asyncio.wait_for(follower, 2)  # well before its 5 s recheck
    assert got[-1] in ("turn.cancelled", "turn.completed")  # as the stop and the reply race


def committed(seq: int, data: str = "{}") -> CommittedEvent:
    return CommittedEvent(seq * 10, seq, "s1", "t1", "turn.started", 1.5, data)


def seqs(found: tuple[list[Event], bool]) -> tuple[list[int], bool]:
    events, whole = found
    return [e.seq for e in events], whole


def test_only_a_gapless_run_from_the_next_seq_is_given() -> None:
    recent = RecentEvents()
    with recent.following("s1"):
        recent.committed([committed(7)])  # its transaction came back first
        recent.committed([committed(5)])
        assert seqs(recent.after("s1", 4, 10)) == ([5], False)  # 6: another process's
        assert seqs(recent.after("s1", 5, 10)) == ([], False)  # read from the log
        recent.committed([committed(6)])
        assert seqs(recent.after("s1", 4, 10)) == ([5, 6, 7], True)
        assert seqs(recent.after("s1", 4, 2)) == ([5, 6], False)
        assert seqs(recent.after("s2", 0, 10)) == ([], False)  # nobody follows it here
    assert seqs(recent.after("s1", 4, 10)) == ([], False)  # its last follower left


def test_each_reader_decodes_its_own_data_and_large_events_are_not_kept() -> None:
    recent = RecentEvents()
    with recent.following("s1"), recent.following("s1"):
        recent.committed([committed(1, '{"items": [1]}'), committed(2, "1" * (MAX_DATA + 1))])
        first, whole = recent.after("s1", 0, 10)
        assert not whole  # the large one came after: it is read from the log
        first[0].data["items"].append(2)
        assert [e.data for e in recent.after("s1", 0, 10)[0]] == [{"items": [1]}]
    recent.committed([committed(3)])  # nobody follows it now: nothing is kept
    with recent.following("s1"):
        assert recent.after("s1", 0, 10) == ([], False)


async def test_many_followers_each_get_the_whole_log_from_few_reads(any_db_url: str) -> None:
    app = App(any_db_url, fire_schedules=False)
    app.agent("echo", model=ScriptedModel(["x" * (MAX_DATA + 1)] * 3))(lambda: "Echo.")
    async with app:
        store = app.runtime.store
        reads = 0
        read_rows = store.event_rows

        def counted(*args: Any) -> Any:
            nonlocal reads
            reads += 1
            return read_rows(*args)

        store.event_rows = counted  # type: ignore[method-assign]
        session = await app.create_session("echo")

        async def follow() -> list[Event]:
            got: list[Event] = []
            async for event in app.follow(session.id):
                got.append(event)
                if sum(e.type == "turn.completed" for e in got) == 3:
                    return got
            return got

        followers = [asyncio.ensure_future(follow()) for _ in range(20)]
        await asyncio.sleep(0.1)
        for text in "abc":  # every reply too large to keep: each turn's end is read
            receipt = await app.send(session.id, text=text)
            await app.wait(receipt.turn_id, timeout=TIMEOUT)
        got = await asyncio.wait_for(asyncio.gather(*followers), TIMEOUT)
        del store.event_rows
        log = [e.to_dict() for e in await app.events(session.id)]
    assert all([e.to_dict() for e in events] == log for events in got)
    first, second = got[0], got[1]
    first[-2].data["message"]["content"].clear()  # each follower decoded its own
    assert second[-2].data["message"]["content"]
    # about one for each wake-up the followers had to read for (6-10 here); one read
    # per follower would be at least 20 for the start and 20 for each turn's end
    assert reads <= 20


async def test_a_read_is_shared_only_by_who_asks_for_its_key_while_it_runs() -> None:
    shared = SharedReads()
    started = 0
    gate = asyncio.Event()

    async def read() -> list[int]:
        nonlocal started
        started += 1
        await gate.wait()
        return [started]

    first = asyncio.ensure_future(shared.once(("events", 1), read))
    same = asyncio.ensure_future(shared.once(("events", 1), read))
    other = asyncio.ensure_future(shared.once(("events", 2), read))  # a newer version: its own
    await asyncio.sleep(0)
    gate.set()
    assert await first is await same
    assert await other == [2]
    assert await shared.once(("events", 1), read) == [3]  # asked after: read again

    async def broken() -> None:
        raise OSError("database is locked")

    calls = [asyncio.ensure_future(shared.once(("x",), broken)) for _ in range(2)]
    for call in calls:
        try:
            await call
        except OSError as err:
            assert "locked" in str(err)
        else:
            raise AssertionError("each caller gets the read's error")


async def test_followers_that_outlive_their_app_still_end_when_cancelled(any_db_url: str) -> None:
    # Stopping wakes every waiting follower; a cancel that comes in the same step
    # must not be lost (asyncio.wait_for on 3.11 returned the wake-up instead).
    app = App(any_db_url, workers=False, fire_schedules=False)
    app.agent("echo", model=ScriptedModel(["x"]))(lambda: "Echo.")
    async with app:
        sessions = [await app.create_session("echo") for _ in range(5)]

        async def follow(session_id: str) -> None:
            async for _ in app.follow(session_id):
                pass

        followers = [asyncio.ensure_future(follow(s.id)) for s in sessions]
        await asyncio.sleep(0.5)  # each waits for news
    for follower in followers:
        follower.cancel()
    done, pending = await asyncio.wait(followers, timeout=5)
    assert not pending
    assert all(task.cancelled() for task in done)


def test_what_is_kept_is_bounded_for_all_sessions_together(monkeypatch: Any) -> None:
    from turnkit.sessions.runtime import recent_events

    monkeypatch.setattr(recent_events, "KEPT", 4)
    recent = RecentEvents()
    with recent.following("s1"), recent.following("s2"):
        recent.committed([committed(1), committed(2), committed(3)])
        recent.committed([committed(1)._replace(session_id="s2", id=99)])
        recent.committed([committed(4)])  # five kept: the oldest goes
        assert seqs(recent.after("s1", 1, 10)) == ([2, 3, 4], True)
        assert seqs(recent.after("s1", 0, 10)) == ([], False)  # 1 was let go: the log has it
        assert seqs(recent.after("s2", 0, 10)) == ([1], True)
        monkeypatch.setattr(recent_events, "KEPT_CHARS", 10)
        recent.committed([committed(5, '"' + "x" * 8 + '"')])  # 10 characters: all else goes
        assert seqs(recent.after("s1", 4, 10)) == ([5], True)
        assert seqs(recent.after("s2", 0, 10)) == ([], False)
