"""Live output of durable turns: deltas from follow(live=True), never in the log."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from turnkit.messages import Message, TextBlock, ThinkingBlock, ToolUseBlock
from turnkit.sessions import App, Event, LiveEvent
from turnkit.sessions.runtime.live import LiveHub
from turnkit.testing import StreamingScriptedModel

TIMEOUT = 20


def tool_reply() -> Message:
    call = ToolUseBlock("call_1", "lookup", {"order": "42", "note": "ünïcode"})
    return Message.assistant(ThinkingBlock("Let me look that up."), TextBlock("Looking."), call)


def lookup(order: str, note: str) -> str:
    """Look up an order."""
    return f"order {order} shipped"


def live_app(url: str, model: Any) -> App:
    app = App(url, fire_schedules=False)
    app.agent("support", model=model, tools=[lookup])(lambda: "Help.")
    return app


async def collect(app: App, session_id: str, after: int = 0) -> list[Event | LiveEvent]:
    items: list[Event | LiveEvent] = []

    async def run() -> None:
        async for item in app.follow(session_id, after=after, live=True):
            items.append(item)
            if isinstance(item, Event) and item.type in ("turn.completed", "turn.failed"):
                return

    await asyncio.wait_for(run(), TIMEOUT)
    return items


async def send_and_collect(app: App, session_id: str, text: str) -> list[Event | LiveEvent]:
    """Follow the session live, then send: the follower is subscribed before the turn
    starts, so every call's deltas are its own (one that comes after a call ended gets
    its message only, and a scripted model can end its first call in a millisecond)."""
    following = app.runtime.live.followers
    items = asyncio.ensure_future(collect(app, session_id))
    while app.runtime.live.followers == following and not items.done():
        await asyncio.sleep(0.005)
    await app.send(session_id, text=text)
    return await items


def joined(items: list[Any], kind: str, call_id: str | None = None) -> str:
    return "".join(
        i.data["text"]
        for i in items
        if isinstance(i, LiveEvent)
        and i.type == kind
        and (call_id is None or i.data.get("call_id") == call_id)
    )


async def test_deltas_join_to_the_recorded_messages_and_stay_out_of_the_log(
    any_db_url: str,
) -> None:
    model = StreamingScriptedModel([tool_reply(), "Order 42 has shipped, all good."], chunk=3)
    app = live_app(any_db_url, model)
    async with app:
        session = await app.create_session("support")
        items = await send_and_collect(app, session.id, "Where is order 42?")
        events = await app.events(session.id)
    durable = [i for i in items if isinstance(i, Event)]
    assert [e.seq for e in durable] == [e.seq for e in events]  # every event, once, in order
    replies = [
        Message.from_dict(e.data["message"])
        for e in durable
        if e.type == "message" and e.data["message"]["role"] == "assistant"
    ]
    first, second = replies
    assert joined(items, "thinking.delta") == "Let me look that up."
    assert joined(items, "text.delta") == "Looking." + second.text
    import json

    assert json.loads(joined(items, "tool_input.delta", "call_1")) == {
        "order": "42",
        "note": "ünïcode",
    }
    live = [i for i in items if isinstance(i, LiveEvent)]
    assert all(i.session_id == session.id for i in live)
    # each delta after the event it follows, before its reply's message
    seen_seq = 0
    for item in items:
        if isinstance(item, Event):
            seen_seq = item.seq
        else:
            assert item.after_seq <= seen_seq
    # indexes count from 0 within each model call
    by_call: dict[int, list[int]] = {}
    for item in live:
        by_call.setdefault(item.after_seq, []).append(item.index)
    assert [indexes for indexes in by_call.values()] == [
        list(range(len(ix))) for ix in by_call.values()
    ]
    assert len(by_call) == 2
    assert first.text == "Looking."
    assert all(not isinstance(e, LiveEvent) for e in events)


async def test_each_calls_deltas_stand_right_after_the_events_before_it(any_db_url: str) -> None:
    # The first call starts with nothing buffered (its seq is the one this process
    # last committed); the second after the tool's result, which is written first.
    model = StreamingScriptedModel([tool_reply(), "Shipped."], chunk=3)
    app = live_app(any_db_url, model)
    async with app:
        session = await app.create_session("support")
        items = await send_and_collect(app, session.id, "Where is order 42?")
    replies = [
        i.seq
        for i in items
        if isinstance(i, Event) and i.type == "message" and i.data["message"]["role"] == "assistant"
    ]
    stands = sorted({i.after_seq for i in items if isinstance(i, LiveEvent)})
    assert stands == [seq - 1 for seq in replies]  # each reply is the next event after


async def test_a_follower_joining_mid_message_gets_the_deltas_from_the_start(
    any_db_url: str,
) -> None:
    hold = threading.Event()
    text = "The answer is forty-two, as computed."
    model = StreamingScriptedModel([text], chunk=2, hold=hold, hold_after=5)
    app = live_app(any_db_url, model)
    async with app:
        session = await app.create_session("support")
        await app.send(session.id, text="Question?")
        early = await asyncio.wait_for(until_live(app.follow(session.id, live=True)), TIMEOUT)
        assert isinstance(early[-1], LiveEvent)  # the model call is streaming, held mid-message
        late = app.follow(session.id, after=0, live=True)
        items = await asyncio.wait_for(until_live(late), TIMEOUT)  # joined mid-message
        hold.set()
        items += await asyncio.wait_for(until_end(late), TIMEOUT)
    assert joined(items, "text.delta") == text
    live = [i for i in items if isinstance(i, LiveEvent)]
    assert [i.index for i in live] == list(range(len(live)))
    durable = [i for i in items if isinstance(i, Event)]
    assert [e.seq for e in durable] == list(range(1, len(durable) + 1))
    assert durable[-1].type == "turn.completed"
    assert items.index(live[-1]) < items.index(durable[-2])  # the deltas, then the message
    assert durable[-2].type == "message"


async def until_live(follower: Any) -> list[Any]:
    """Items of ``follower`` up to and including its first LiveEvent."""
    items = []
    async for item in follower:
        items.append(item)
        if isinstance(item, LiveEvent):
            return items
    return items


async def until_end(follower: Any) -> list[Any]:
    items = []
    async for item in follower:
        items.append(item)
        if isinstance(item, Event) and item.type in ("turn.completed", "turn.failed"):
            break
    await follower.aclose()
    return items


async def test_a_follower_elsewhere_gets_every_delta_before_the_message_its_watcher_missed(
    any_db_url: str, monkeypatch: Any
) -> None:
    """Another process's watcher may bring a call's last deltas after its reply is
    recorded (or not at all): the follower still gives every delta, then the message."""
    text = "Streamed by the worker, read by a follower whose watcher never runs."
    worker = live_app(any_db_url, StreamingScriptedModel([text], chunk=3, delay=0.01))
    follower_app = App(any_db_url, workers=False, fire_schedules=False)
    follower_app.agent("support", model=StreamingScriptedModel(), tools=[lookup])(lambda: "Help.")
    monkeypatch.setattr(LiveHub, "_ensure_watcher", lambda self: None)  # nothing is brought
    async with worker, follower_app:
        session = await worker.create_session("support")
        follow = asyncio.ensure_future(collect(follower_app, session.id))
        await asyncio.sleep(0.2)  # subscribed before the turn streams
        await worker.send(session.id, text="Go")
        items = await follow
    live = [i for i in items if isinstance(i, LiveEvent)]
    assert len(live) > 3 and joined(items, "text.delta") == text
    assert [i.index for i in live] == list(range(len(live)))
    message = next(
        i
        for i in items
        if isinstance(i, Event) and i.type == "message" and i.data["message"]["role"] == "assistant"
    )
    assert items.index(live[-1]) < items.index(message)


async def test_a_version_6_database_gains_the_done_mark_of_live_deltas(tmp_path: Any) -> None:
    import sqlalchemy as sa

    url = f"sqlite:///{tmp_path / 'v6.db'}"
    text = "Streamed after the upgrade."
    app = live_app(url, StreamingScriptedModel([text], chunk=3))
    async with app:
        pass
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # back to what version 6 wrote
        conn.exec_driver_sql("DROP INDEX ix_turnkit_live_done")  # version 10's
        conn.exec_driver_sql("ALTER TABLE turnkit_live DROP COLUMN done_at")
        conn.exec_driver_sql("UPDATE turnkit_meta SET value = '6' WHERE key = 'schema_version'")
    engine.dispose()
    app = live_app(url, StreamingScriptedModel([text], chunk=3))
    async with app:
        session = await app.create_session("support")
        items = await send_and_collect(app, session.id, "Go")
    assert joined(items, "text.delta") == text
    with sa.create_engine(url).connect() as conn:
        done = conn.exec_driver_sql("SELECT count(*) FROM turnkit_live WHERE done_at IS NULL")
        assert done.scalar() == 0  # the call's deltas were marked done with its reply


async def test_a_follower_that_does_not_read_is_dropped_and_can_follow_again(
    any_db_url: str, monkeypatch: Any
) -> None:
    from turnkit.errors import SlowFollowerError
    from turnkit.sessions.runtime import live as live_module

    monkeypatch.setattr(live_module, "QUEUE_LIMIT", 5)  # deltas one follower may leave waiting
    text = "x" * 64 * 20  # twenty deltas of 64 characters
    hold = threading.Event()  # the model streams once the follower has its first event
    app = live_app(any_db_url, StreamingScriptedModel([text], chunk=64, hold=hold))
    async with app:
        session = await app.create_session("support")
        slow = app.follow(session.id, live=True)
        receipt = await app.send(session.id, text="Go")
        first = await asyncio.wait_for(anext(slow), TIMEOUT)  # subscribed; then it stops reading
        hold.set()
        await app.wait(receipt.turn_id, timeout=TIMEOUT)
        with pytest.raises(SlowFollowerError) as caught:
            while True:
                await asyncio.wait_for(anext(slow), TIMEOUT)
        dropped = caught.value
        assert dropped.session_id == session.id and dropped.last_seq >= first.seq
        assert f"follow again from after={dropped.last_seq}" in str(dropped)
        again = await collect(app, session.id, after=dropped.last_seq)  # nothing is lost
    seqs = [e.seq for e in again if isinstance(e, Event)]
    assert seqs == list(range(dropped.last_seq + 1, seqs[-1] + 1))
    assert again[-1].type == "turn.completed"


async def test_deltas_done_long_ago_are_swept_by_a_later_turns_end(
    any_db_url: str, monkeypatch: Any
) -> None:
    import sqlalchemy as sa

    from sessions.scale_procs import sa_url
    from turnkit.sessions.db import live

    monkeypatch.setattr(live, "SWEEP_EVERY_S", 0.0)  # a sweep is due at every end

    app = live_app(any_db_url, StreamingScriptedModel(["First reply.", "Second."], chunk=3))
    async with app:
        session = await app.create_session("support")
        first = await app.send(session.id, text="One")
        await app.wait(first.turn_id, timeout=TIMEOUT)
        engine = sa.create_engine(sa_url(any_db_url))
        with engine.begin() as conn:  # as if the first reply was recorded a minute ago
            conn.execute(sa.text("UPDATE turnkit_live SET done_at = done_at - 60"))
        second = await app.send(session.id, text="Two")
        await app.wait(second.turn_id, timeout=TIMEOUT)
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT turn_id, done_at FROM turnkit_live")).all()
        engine.dispose()
    assert rows and {turn for turn, _ in rows} == {second.turn_id}  # the old ones are gone
    assert all(done is not None for _, done in rows)


async def test_deltas_a_consumer_takes_at_once_and_those_it_is_given_come_once_in_order(
    any_db_url: str,
) -> None:
    from turnkit.sessions.runtime.live_follow import follow_live

    text = "word " * 60
    app = live_app(any_db_url, StreamingScriptedModel([text], chunk=4, delay=0.005))
    items: list[Event | LiveEvent] = []
    direct: list[LiveEvent] = []
    refuse = False

    def give_now(event: LiveEvent) -> bool:  # takes every other delta it is offered
        nonlocal refuse
        refuse = not refuse
        if not refuse:
            items.append(event)
            direct.append(event)
        return not refuse

    async with app:
        session = await app.create_session("support")
        runtime = app.runtime

        async def read(after: int, limit: int) -> list[Any]:
            return await asyncio.to_thread(runtime.store.event_rows, session.id, after, limit)

        merged = follow_live(runtime.live, session.id, 0, app.follow(session.id, 0), read, give_now)
        await app.send(session.id, text="Go")

        async def run() -> None:
            async for item in merged:
                items.append(item)
                if isinstance(item, Event) and item.type == "turn.completed":
                    return

        await asyncio.wait_for(run(), TIMEOUT)
        await merged.aclose()
    deltas = [i for i in items if isinstance(i, LiveEvent)]
    assert direct and len(direct) < len(deltas)  # both ways were taken
    assert [d.index for d in deltas] == list(range(len(deltas)))
    assert joined(items, "text.delta") == text
    replies = [i for i in items if isinstance(i, Event) and i.type == "message"]
    reply = next(r for r in replies if r.data["message"]["role"] == "assistant")
    assert items.index(reply) > items.index(deltas[-1])  # the message after its deltas


async def test_deltas_are_stored_once_this_processes_followers_have_them(
    any_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's thread would hold up the loop that hands deltas to followers (the
    GIL): a delta is written only once the follower here (on another loop than the
    turn's) has it, taken at once or queued for its iterator."""
    from turnkit.sessions.runtime import live as live_module

    app = live_app(any_db_url, StreamingScriptedModel(["word " * 30], chunk=5, delay=0.01))
    had: list[LiveEvent] = []  # what the follower's loop was served (taken or queued)
    unseen_at_store: list[int] = []
    store, serve = LiveHub.store, live_module._serve

    def checked_store(hub: LiveHub, step: str, rows: Any) -> None:
        unseen_at_store.extend(row.event.index for row in rows if row.event not in had)
        store(hub, step, rows)

    def noted_serve(subs: Any, rows: Any) -> None:
        had.extend(row.event for row in rows)
        serve(subs, rows)

    monkeypatch.setattr(LiveHub, "store", checked_store)
    monkeypatch.setattr(live_module, "_serve", noted_serve)
    async with app:
        session = await app.create_session("support")
        items = await send_and_collect(app, session.id, "Go")
    assert joined(items, "text.delta") == "word " * 30
    assert had and unseen_at_store == []


async def test_a_follower_whose_loop_is_stuck_holds_up_no_store(any_db_url: str) -> None:
    """Storing waits for this process's followers only a moment: one whose loop does
    not run still lets the turn's deltas be written for followers elsewhere."""
    import sqlalchemy as sa

    from sessions.scale_procs import sa_url

    app = live_app(any_db_url, StreamingScriptedModel(["stuck " * 20], chunk=6, delay=0.005))
    stuck = asyncio.new_event_loop()  # never runs
    try:
        async with app:
            session = await app.create_session("support")
            sub = await asyncio.to_thread(app.runtime.live.subscribe, session.id, stuck)
            result = await app.send(session.id, text="Go")
            await app.wait(result.turn_id, timeout=TIMEOUT)
            app.runtime.live.unsubscribe(sub)
            engine = sa.create_engine(sa_url(any_db_url))
            with engine.connect() as conn:
                query = sa.text("SELECT data FROM turnkit_live ORDER BY id")
                texts = conn.execute(query).scalars().all()
            engine.dispose()
    finally:
        stuck.close()
    assert "".join(json.loads(text)["text"] for text in texts) == "stuck " * 20
