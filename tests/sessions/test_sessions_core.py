"""Sessions: create, send, wait, history, events, follow, cancel, end; order and parallelism."""

from __future__ import annotations

import asyncio
import itertools
import threading

import pytest

import turnkit
from turnkit.sessions import (
    App,
    InvalidInputError,
    SessionEndedError,
    SessionNotFoundError,
    TurnNotFoundError,
    UnknownAgentError,
)
from turnkit.testing import ScriptedModel


def echo_model() -> ScriptedModel:
    return ScriptedModel([lambda request: f"echo:{request.last_text}"] * 200)


def echo_app(db_url: str, **agent_options: object) -> App:
    app = App(db_url)

    @app.agent("echo", model=echo_model(), **agent_options)
    def echo() -> str:
        return "Repeat what you are told."

    return app


async def test_send_runs_a_turn_and_records_history_and_events(db_url: str) -> None:
    app = echo_app(db_url)
    async with app:
        session = await app.create_session("echo")
        assert session.status == "idle" and session.agent == "echo" and session.key is None
        receipt = await app.send(session.id, text="Hi")
        assert receipt.status == "queued" and receipt.turn_id and not receipt.duplicate
        turn = await app.wait(receipt.turn_id, timeout=10)
        assert turn.status == "completed"
        assert turn.output == "echo:Hi"
        assert turn.input.text == "Hi" and turn.input.source == "user"
        assert turn.started_at is not None and turn.ended_at >= turn.started_at
        history = await app.history(session.id)
        assert [(m.role, m.text) for m in history] == [("user", "Hi"), ("assistant", "echo:Hi")]
        events = await app.events(session.id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        assert [e.type for e in events] == [
            "input.received",
            "turn.started",
            "message",
            "message",
            "turn.completed",
        ]
        assert events[0].data["held"] is False and events[0].data["input_id"] == receipt.input_id
        assert events[-1].data["result"] == {"text": "echo:Hi", "truncated": False}
        assert all(e.turn_id == receipt.turn_id for e in events)
        assert (await app.events(session.id, after=3)) == events[3:]
        assert (await app.get_session(session.id)).status == "idle"


async def test_a_key_makes_create_session_get_or_create(db_url: str) -> None:
    app = echo_app(db_url)
    async with app:
        first = await app.create_session("echo", key="ticket-42", data={"n": 1})
        again = await app.create_session("echo", key="ticket-42", data={"n": 2})
        other = await app.create_session("echo", key="ticket-43")
        assert again.id == first.id and again.data == {"n": 1}
        assert other.id != first.id
        both = await asyncio.gather(*(app.create_session("echo", key="race") for _ in range(5)))
        assert len({s.id for s in both}) == 1


async def test_render_runs_before_every_model_call_with_hooks(db_url: str) -> None:
    app = App(db_url)
    seen: list[str] = []

    @turnkit.tool
    def lookup(order: str) -> str:
        """Look up an order."""
        return f"order {order} shipped"

    @app.tool
    def refund(order: str) -> str:
        """Refund an order."""
        return "refunded"

    model = ScriptedModel(
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"order": "7"}}
                ],
            },
            "It shipped.",
        ]
    )

    @app.agent("support", model=model, tools=[lookup])
    def support() -> str:
        request = turnkit.use_input()
        assert turnkit.use_current_input() is request
        data = turnkit.use_session_data()
        data["renders"] = data.get("renders", 0) + 1
        turnkit.use_tool("refund")
        seen.append(request.text)
        return f"Help with: {request.text} (render {data['renders']})"

    async with app:
        session = await app.create_session("support", data={"renders": 10})
        receipt = await app.send(session.id, text="where is 7?")
        turn = await app.wait(receipt.turn_id, timeout=10)
        assert turn.status == "completed" and turn.output == "It shipped.", turn.error
        assert seen == ["where is 7?", "where is 7?"]
        assert [r.system for r in model.requests] == [
            "Help with: where is 7? (render 11)",
            "Help with: where is 7? (render 12)",
        ]
        assert all(r.tool_names == ("lookup", "refund") for r in model.requests)
        assert (await app.get_session(session.id)).data == {"renders": 12}
        types = [e.type for e in await app.events(session.id)]
        assert types.count("tool.started") == 1 and types.count("tool.finished") == 1


def test_hooks_outside_a_render_raise() -> None:
    for hook in (turnkit.use_input, turnkit.use_current_input, turnkit.use_session_data):
        with pytest.raises(RuntimeError, match="only while an agent's render"):
            hook()
    with pytest.raises(RuntimeError, match="only while"):
        turnkit.use_tool("ask")


async def test_a_render_that_raises_fails_the_turn_and_the_session_goes_on(db_url: str) -> None:
    app = App(db_url)
    model = ScriptedModel(["fine"])

    @app.agent("fragile", model=model)
    def fragile() -> str:
        if turnkit.use_input().text == "boom":
            raise KeyError("missing")
        return "ok"

    async with app:
        session = await app.create_session("fragile")
        bad = await app.send(session.id, text="boom")
        good = await app.send(session.id, text="hello")
        failed = await app.wait(bad.turn_id, timeout=10)
        assert failed.status == "failed" and failed.reason == "render_error"
        assert "KeyError" in failed.error and "fragile" in failed.error
        assert (await app.wait(good.turn_id, timeout=10)).output == "fine"
        events = await app.events(session.id)
        failure = next(e for e in events if e.type == "turn.failed")
        assert failure.data["reason"] == "render_error"


async def test_twenty_inputs_at_once_run_as_twenty_turns_in_order(db_url: str) -> None:
    app = echo_app(db_url)
    async with app:
        session = await app.create_session("echo")
        receipts = await asyncio.gather(*(app.send(session.id, text=f"m{i}") for i in range(20)))
        turns = [await app.wait(r.turn_id, timeout=30) for r in receipts]
        assert all(t.status == "completed" for t in turns)
        # Accepted order is the turns' seq order; they ran in that order.
        by_seq = sorted(turns, key=lambda t: t.seq)
        starts = [t.started_at for t in by_seq]
        assert starts == sorted(starts)
        assert all(a.ended_at <= b.started_at for a, b in itertools.pairwise(by_seq))
        history = await app.history(session.id)
        users = [m.text for m in history if m.role == "user"]
        assert users == [t.input.text for t in by_seq]
        assert [m.text for m in history if m.role == "assistant"] == [f"echo:{u}" for u in users]
        events = await app.events(session.id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_a_blocked_turn_does_not_hold_up_another_session(db_url: str) -> None:
    release = threading.Event()
    entered = threading.Event()
    app = App(db_url)

    @turnkit.tool
    def wait_for_release() -> str:
        """Block until released."""
        entered.set()
        release.wait(20)
        return "released"

    slow_model = ScriptedModel(
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "w", "name": "wait_for_release", "input": {}}
                ],
            },
            "slow done",
        ]
    )

    @app.agent("slow", model=slow_model, tools=[wait_for_release])
    def slow() -> str:
        return "wait"

    @app.agent("fast", model=echo_model())
    def fast() -> str:
        return "echo"

    async with app:
        blocked = await app.create_session("slow")
        free = await app.create_session("fast")
        slow_receipt = await app.send(blocked.id, text="block")
        await asyncio.to_thread(entered.wait, 10)
        assert (await app.get_session(blocked.id)).status == "running"
        fast_turn = await app.wait((await app.send(free.id, text="quick")).turn_id, timeout=10)
        assert fast_turn.output == "echo:quick"
        with pytest.raises(TimeoutError):
            await app.wait(slow_receipt.turn_id, timeout=0.05)
        release.set()
        assert (await app.wait(slow_receipt.turn_id, timeout=10)).output == "slow done"


async def test_cancel_stops_the_running_turn_and_queued_inputs_still_run(db_url: str) -> None:
    entered = threading.Event()
    app = App(db_url)

    @turnkit.tool
    async def forever() -> str:
        """Never finishes."""
        entered.set()
        await asyncio.sleep(3600)
        return "never"

    model = ScriptedModel(
        [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "f", "name": "forever", "input": {}}],
            },
            "after cancel",
        ]
    )

    @app.agent("stuck", model=model, tools=[forever])
    def stuck() -> str:
        return "go"

    async with app:
        session = await app.create_session("stuck")
        first = await app.send(session.id, text="start")
        second = await app.send(session.id, text="next")
        await asyncio.to_thread(entered.wait, 10)
        assert await app.cancel(session.id) == first.turn_id
        cancelled = await app.wait(first.turn_id, timeout=10)
        assert cancelled.status == "cancelled" and cancelled.reason == "cancelled"
        assert (await app.wait(second.turn_id, timeout=10)).output == "after cancel"
        history = await app.history(session.id)
        result = history[2].content[0]
        assert result.tool_use_id == "f" and result.is_error
        assert "interrupted" in result.content
        assert await app.cancel(session.id) is None


async def test_end_session_refuses_later_sends_and_cancels_queued_turns(db_url: str) -> None:
    app = echo_app(db_url)
    async with app:
        session = await app.create_session("echo")
        done = await app.send(session.id, text="one", idempotency_key="first")
        await app.wait(done.turn_id, timeout=10)
        ended = await app.end_session(session.id)
        assert ended.status == "ended" and ended.ended_at is not None
        with pytest.raises(SessionEndedError, match=session.id):
            await app.send(session.id, text="two")
        # A repeated idempotency key still answers with its first receipt.
        again = await app.send(session.id, text="one", idempotency_key="first")
        assert again.duplicate and again.input_id == done.input_id
        assert (await app.end_session(session.id)).status == "ended"  # idempotent


async def test_idempotency_key_returns_the_first_receipt_and_stores_nothing(db_url: str) -> None:
    app = echo_app(db_url)
    async with app:
        session = await app.create_session("echo")
        first = await app.send(session.id, text="hi", idempotency_key="k1")
        again = await app.send(session.id, text="something else", idempotency_key="k1")
        assert again.duplicate and (again.input_id, again.turn_id) == (
            first.input_id,
            first.turn_id,
        )
        await app.wait(first.turn_id, timeout=10)
        events = await app.events(session.id)
        assert [e.type for e in events].count("input.received") == 1


async def test_follow_replays_then_yields_new_events_live(db_url: str) -> None:
    app = echo_app(db_url)
    async with app:
        session = await app.create_session("echo")
        first = await app.send(session.id, text="a")
        await app.wait(first.turn_id, timeout=10)
        seen: list[str] = []

        async def follow() -> None:
            async for event in app.follow(session.id, after=0):
                seen.append(event.type)
                if seen.count("turn.completed") == 2:
                    return

        follower = asyncio.create_task(follow())
        await asyncio.sleep(0)
        await app.send(session.id, text="b")
        await asyncio.wait_for(follower, 10)
        assert seen == [e.type for e in await app.events(session.id)]


async def test_follow_ends_after_the_session_ends(db_url: str) -> None:
    app = echo_app(db_url)
    async with app:
        session = await app.create_session("echo")
        await app.wait((await app.send(session.id, text="a")).turn_id, timeout=10)
        await app.end_session(session.id)
        events = [e async for e in app.follow(session.id)]
        assert events == await app.events(session.id)


def test_sync_twins_and_with_app(db_url: str) -> None:
    app = echo_app(db_url)
    with app:
        session = app.create_session_sync("echo", key="sync")
        receipt = app.send_sync(session.id, "hello")
        assert app.wait_sync(receipt.turn_id, timeout=10).output == "echo:hello"
        assert [m.text for m in app.history_sync(session.id)] == ["hello", "echo:hello"]
        assert app.events_sync(session.id)[-1].type == "turn.completed"
        assert app.get_session_sync(session.id).status == "idle"
        assert app.cancel_sync(session.id) is None
        assert app.end_session_sync(session.id).status == "ended"


async def test_unknown_ids_and_agents_raise_clear_errors(db_url: str) -> None:
    app = echo_app(db_url)
    async with app:
        with pytest.raises(UnknownAgentError, match=r"'nobody'.*'echo'"):
            await app.create_session("nobody")
        with pytest.raises(SessionNotFoundError, match="ses_missing"):
            await app.get_session("ses_missing")
        with pytest.raises(SessionNotFoundError):
            await app.send("ses_missing", text="hi")
        with pytest.raises(SessionNotFoundError):
            await app.history("ses_missing")
        with pytest.raises(SessionNotFoundError):
            await app.events("ses_missing")
        with pytest.raises(TurnNotFoundError):
            await app.wait("turn_missing", timeout=1)
        with pytest.raises(InvalidInputError, match="session_id"):
            await app.send(None, text="hi")  # type: ignore[arg-type]


async def test_wait_times_out_with_a_clear_error(db_url: str) -> None:
    gate = threading.Event()
    app = App(db_url)

    @app.agent("slow", model=ScriptedModel([lambda r: gate.wait(10) and "late"]))
    def slow() -> str:
        return ""

    async with app:
        session = await app.create_session("slow")
        receipt = await app.send(session.id, text="x")
        with pytest.raises(TimeoutError, match="still"):
            await app.wait(receipt.turn_id, timeout=0.2)
        gate.set()
        assert (await app.wait(receipt.turn_id, timeout=10)).output == "late"


async def test_methods_need_a_started_app(db_url: str) -> None:
    app = echo_app(db_url)
    with pytest.raises(RuntimeError, match="not started"):
        await app.create_session("echo")


async def test_one_running_app_per_process(db_url: str, tmp_path) -> None:
    first = echo_app(db_url)
    second = echo_app(f"sqlite:///{tmp_path / 'other.db'}")
    async with first:
        with pytest.raises(RuntimeError, match="already running"):
            await second.start()
    async with second:
        pass
