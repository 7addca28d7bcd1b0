"""The live hub's hand-over: followers on a loop are served in one step of it, in order,
and a loop that does not run holds a bounded number of deltas."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from turnkit.errors import SlowFollowerError
from turnkit.sessions import App, Event, LiveEvent
from turnkit.sessions.db.live import LiveRow
from turnkit.sessions.runtime import live as live_module
from turnkit.sessions.runtime.live import LiveHub, Subscription
from turnkit.testing import StreamingScriptedModel

TIMEOUT = 20


def rows(session_id: str, stream: str, indexes: range) -> list[LiveRow]:
    return [
        LiveRow(0, stream, LiveEvent(session_id, "t1", 1, "text.delta", i, {"text": f"{i} "}))
        for i in indexes
    ]


def from_thread(work: Any) -> Any:
    """Run ``work()`` on another thread while this loop is held up (it blocks here)."""
    done: list[Any] = []
    thread = threading.Thread(target=lambda: done.append(work()))
    thread.start()
    thread.join()
    return done[0]


async def woken(sub: Subscription) -> None:
    await asyncio.wait_for(sub.wait(), TIMEOUT)


async def until_done(app: App, session_id: str, after: int) -> Any:
    async for item in app.follow(session_id, after=after):
        if isinstance(item, Event):
            yield item
            if item.type == "turn.completed":
                return


@pytest.fixture
async def started(db_url: str) -> Any:
    app = App(db_url, fire_schedules=False)
    app.agent("writer", model=StreamingScriptedModel(["unused"]))(lambda: "Write.")
    async with app:
        yield app


async def test_deltas_from_another_thread_wake_the_followers_loop_once_and_come_in_order(
    started: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub: LiveHub = started.runtime.live
    session = await started.create_session("writer")
    loop = asyncio.get_running_loop()
    subs = [await asyncio.to_thread(hub.subscribe, session.id, loop) for _ in range(3)]
    drains: list[object] = []
    drain = LiveHub._drain

    def counted(self: LiveHub, on: asyncio.AbstractEventLoop) -> None:
        drains.append(on)
        drain(self, on)

    monkeypatch.setattr(LiveHub, "_drain", counted)
    # Ten hand-overs while this loop is busy (it waits for the thread here).
    served = from_thread(
        lambda: [hub.deliver(rows(session.id, "s1", range(i, i + 2))) for i in range(0, 20, 2)]
    )
    assert not any(f.done() for found in served for f in found)  # nobody has them yet
    assert all(not sub._items for sub in subs)
    await asyncio.sleep(0)  # one step of the loop serves them all
    assert drains == [loop]
    assert all(f.done() for found in served for f in found)
    for sub in subs:
        assert [row.event.index for row in sub.take()] == list(range(20))
    for sub in subs:
        hub.unsubscribe(sub)


async def test_deltas_handed_over_on_the_followers_loop_come_after_those_still_on_their_way(
    started: App,
) -> None:
    hub: LiveHub = started.runtime.live
    session = await started.create_session("writer")
    sub = await asyncio.to_thread(hub.subscribe, session.id, asyncio.get_running_loop())
    from_thread(lambda: hub.deliver(rows(session.id, "a", range(3))))  # not served yet
    assert hub.deliver(rows(session.id, "b", range(2)))  # here: waits for those first
    assert not sub._items
    await asyncio.sleep(0)
    got = [(row.stream, row.event.index) for row in sub.take()]
    assert got == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)]
    assert hub.deliver(rows(session.id, "b", range(2, 4))) == []
    assert [row.event.index for row in sub.take()] == [2, 3]
    hub.unsubscribe(sub)


async def test_a_loop_that_does_not_run_holds_a_bounded_number_of_deltas(
    started: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(live_module, "QUEUE_LIMIT", 5)
    hub: LiveHub = started.runtime.live
    session = await started.create_session("writer")
    stuck = asyncio.new_event_loop()  # never runs until the end
    try:
        sub: Subscription = await asyncio.to_thread(hub.subscribe, session.id, stuck)
        for i in range(40):
            hub.deliver(rows(session.id, "s1", range(i, i + 1)))
            assert sum(len(found) for _, _, found in hub._inboxes[stuck].batches) <= 5
        assert sub.dropped  # its follower ends once its loop runs again
        await asyncio.to_thread(stuck.run_until_complete, woken(sub))
        assert sub.take() == []
        hub.unsubscribe(sub)
        assert stuck not in hub._inboxes  # nobody left there to serve
    finally:
        stuck.close()


async def test_a_stuck_loop_counts_each_sessions_deltas_apart(
    started: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many sessions streaming at once add up; a follower is dropped only when its own
    session's deltas pile up (as it would be on a loop that runs)."""
    monkeypatch.setattr(live_module, "QUEUE_LIMIT", 5)
    hub: LiveHub = started.runtime.live
    busy, quiet = [await started.create_session("writer") for _ in range(2)]
    stuck = asyncio.new_event_loop()
    try:
        subs = [await asyncio.to_thread(hub.subscribe, s.id, stuck) for s in (busy, quiet)]
        hub.deliver(rows(quiet.id, "q", range(4)))
        for i in range(8):
            hub.deliver(rows(busy.id, "b", range(i, i + 1)))
        assert [sub.dropped for sub in subs] == [True, False]
        await asyncio.to_thread(stuck.run_until_complete, woken(subs[1]))
        assert [row.event.index for row in subs[1].take()] == [0, 1, 2, 3]
        assert subs[0].take() == []
        for sub in subs:
            hub.unsubscribe(sub)
    finally:
        stuck.close()


async def test_followers_on_a_closed_loop_hold_nothing_up(started: App) -> None:
    hub: LiveHub = started.runtime.live
    session = await started.create_session("writer")
    gone = asyncio.new_event_loop()
    sub = await asyncio.to_thread(hub.subscribe, session.id, gone)
    gone.close()
    served = hub.deliver(rows(session.id, "s1", range(3)))
    assert served and all(f.done() for f in served)  # nobody there to wait for
    assert gone not in hub._inboxes
    hub.unsubscribe(sub)


async def test_a_follower_whose_loop_is_held_up_while_a_turn_streams_is_dropped(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower on a loop of its own that stops running (blocked by other work) while
    many deltas come is dropped, not buffered: its iterator ends with
    SlowFollowerError once the loop runs again, and it can follow again from there."""
    monkeypatch.setattr(live_module, "QUEUE_LIMIT", 5)
    app = App(db_url, fire_schedules=False)
    model = StreamingScriptedModel(["y" * 64 * 20], chunk=64, delay=0.001)  # 20 deltas
    app.agent("writer", model=model)(lambda: "Write.")
    async with app:
        session = await app.create_session("writer")
        subscribed, release = threading.Event(), threading.Event()
        got: list[Any] = []

        async def follow() -> None:
            try:
                async for item in app.follow(session.id, live=True):
                    got.append(item)
                    if isinstance(item, Event) and item.type == "turn.completed":
                        return
                    if not subscribed.is_set():
                        subscribed.set()
                        release.wait(TIMEOUT)  # the loop is held up: it runs nothing
            except SlowFollowerError as err:
                got.append(err)

        follower = threading.Thread(target=lambda: asyncio.run(follow()))
        follower.start()
        try:
            receipt = await app.send(session.id, text="Go")
            assert await asyncio.to_thread(subscribed.wait, TIMEOUT)
            await app.wait(receipt.turn_id, timeout=TIMEOUT)
        finally:
            release.set()
            await asyncio.to_thread(follower.join, TIMEOUT)
        assert isinstance(got[-1], SlowFollowerError)
        again = [e async for e in until_done(app, session.id, got[-1].last_seq)]
    assert again[-1].type == "turn.completed"


async def test_a_catch_up_reads_this_processes_own_events_from_memory(db_url: str) -> None:
    """A delta that stands after events its follower has not been given yet comes after
    them; those this process committed come from memory, with no database read."""
    from turnkit.sessions.runtime.live_follow import follow_live

    text = "Caught up from memory."
    app = App(db_url, fire_schedules=False)
    app.agent("writer", model=StreamingScriptedModel([text], chunk=4, delay=0.005))(
        lambda: "Write."
    )
    reads: list[tuple[int, int]] = []

    async def read_rows(after: int, limit: int) -> list[Any]:
        reads.append((after, limit))
        return await asyncio.to_thread(app.runtime.store.event_rows, session.id, after, limit)

    async def silent() -> Any:  # a durable source that gives nothing: only catch-ups do
        await asyncio.Event().wait()
        yield

    async with app:
        session = await app.create_session("writer")
        items: list[Any] = []
        with app.runtime.notifier.recent.following(session.id):
            merged = follow_live(app.runtime.live, session.id, 0, silent(), read_rows)

            async def run() -> None:
                given = ""
                async for item in merged:
                    items.append(item)
                    if isinstance(item, LiveEvent):
                        given += item.data["text"]
                        if given == text:  # (what follows comes only with the next delta)
                            return

            reading = asyncio.ensure_future(run())
            while not app.runtime.live.followers:
                await asyncio.sleep(0.005)
            receipt = await app.send(session.id, text="Go")
            await app.wait(receipt.turn_id, timeout=TIMEOUT)
            await asyncio.wait_for(reading, TIMEOUT)
            await merged.aclose()
    deltas = [i for i in items if isinstance(i, LiveEvent)]
    assert "".join(d.data["text"] for d in deltas) == text
    seqs = [i.seq for i in items if isinstance(i, Event)]
    assert seqs and seqs == list(range(1, seqs[-1] + 1))  # each event once, in order
    at = {item.seq: n for n, item in enumerate(items) if isinstance(item, Event)}
    assert all(n > at[d.after_seq] for n, d in enumerate(items) if isinstance(d, LiveEvent))
    assert reads == []  # all of it from memory
