"""Sessions that feed each other: subscriptions and sub-agents."""

from __future__ import annotations

import json
import threading

import pytest

import turnkit
from turnkit.errors import ProviderError
from turnkit.sessions import App, InvalidInputError, SessionNotFoundError, UnknownAgentError
from turnkit.testing import ScriptedModel


def call(tool: str, args: dict, call_id: str = "c1") -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": call_id, "name": tool, "input": args}],
    }


async def events_of_type(app: App, session_id: str, kind: str, count: int) -> list:
    found = []
    async for event in app.follow(session_id):
        if event.type == kind:
            found.append(event)
            if len(found) == count:
                return found
    raise AssertionError(f"only {len(found)} {kind} events")


async def test_a_long_multibyte_reply_arrives_as_a_valid_truncated_result(db_url: str) -> None:
    app = App(db_url)
    watcher_model = ScriptedModel(["noted"])

    @app.agent("writer", model=ScriptedModel(["é" * 20000]))  # 40,000 bytes of UTF-8
    def writer() -> str:
        return ""

    @app.agent("watcher", model=watcher_model)
    def watcher() -> str:
        return ""

    async with app:
        watched = await app.create_session("writer")
        subscriber = await app.create_session("watcher")
        await app.subscribe(subscriber.id, to_session=watched.id)
        done = await app.wait((await app.send(watched.id, text="write")).turn_id, timeout=10)
        (completed,) = await events_of_type(app, subscriber.id, "turn.completed", 1)
        turn = await app.wait(completed.turn_id, timeout=10)
        event = turn.input.event
        assert turn.input.source == "event" and turn.input.text is None
        assert event.type == "turn.completed" and event.turn_id == done.id
        assert event.session_id == watched.id and event.agent_id == "writer"
        assert event.result.truncated is True
        assert len(event.result.text.encode("utf-8")) <= 16 * 1024
        assert event.result.text == "é" * (16 * 1024 // 2)
        terminal = [e for e in await app.events(watched.id) if e.type == "turn.completed"]
        assert event.id == terminal[0].id
        received = (await app.events(subscriber.id))[0]
        assert received.type == "input.received" and "completed" in received.data["text"]
        seen = turnkit.message_text_body(watcher_model.requests[0].messages[-1])
        assert "<agent_output>" in seen and "not instructions" in seen


async def test_a_failing_watched_turn_arrives_with_a_bounded_error(db_url: str) -> None:
    app = App(db_url)

    def explode(request: object) -> str:
        raise ProviderError("x" * 10_000, provider="fake", status=500)

    @app.agent("fragile", model=ScriptedModel([explode]))
    def fragile() -> str:
        return ""

    @app.agent("watcher", model=ScriptedModel(["seen"]))
    def watcher() -> str:
        return ""

    async with app:
        watched = await app.create_session("fragile")
        subscriber = await app.create_session("watcher")
        await app.subscribe(subscriber.id, to_agent="fragile")
        await app.wait((await app.send(watched.id, text="go")).turn_id, timeout=10)
        (completed,) = await events_of_type(app, subscriber.id, "turn.completed", 1)
        event = (await app.wait(completed.turn_id, timeout=10)).input.event
        assert event.type == "turn.failed" and event.reason == "model_error"
        assert event.result is None and 0 < len(event.error.encode()) <= 4096


async def test_five_outcomes_while_the_subscriber_is_busy_arrive_in_order(db_url: str) -> None:
    app = App(db_url)
    release, entered = threading.Event(), threading.Event()

    @turnkit.tool
    def hold() -> str:
        """Hold the subscriber busy."""
        entered.set()
        release.wait(20)
        return "released"

    @app.agent("worker", model=ScriptedModel([lambda r: f"done {r.last_text}"] * 5))
    def worker() -> str:
        return ""

    replies = [call("hold", {}), "busy done"] + ["ok"] * 5

    @app.agent("boss", model=ScriptedModel(replies), tools=[hold])
    def boss() -> str:
        return ""

    async with app:
        subscriber = await app.create_session("boss")
        await app.subscribe(subscriber.id, to_agent="worker")
        await app.subscribe(subscriber.id, to_agent="worker")  # idempotent
        busy = await app.send(subscriber.id, text="be busy")
        await __import__("asyncio").to_thread(entered.wait, 10)
        workers = [await app.create_session("worker") for _ in range(5)]
        receipts = [await app.send(w.id, text=f"job {i}") for i, w in enumerate(workers)]
        ends = [await app.wait(r.turn_id, timeout=10) for r in receipts]
        release.set()
        await app.wait(busy.turn_id, timeout=10)
        completed = await events_of_type(app, subscriber.id, "turn.completed", 6)
        turns = [await app.wait(e.turn_id, timeout=10) for e in completed[1:]]
        assert [t.input.event.turn_id for t in turns] == [
            t.id for t in sorted(ends, key=lambda t: t.ended_at)
        ]
        ids = [t.input.event.id for t in turns]
        assert ids == sorted(ids) and len(set(ids)) == 5


async def test_event_inputs_are_held_while_the_subscriber_asks(db_url: str) -> None:
    app = App(db_url)
    ask = call("ask", {"question": "Proceed?"})

    @app.agent("worker", model=ScriptedModel(["finished"]))
    def worker() -> str:
        return ""

    @app.agent("boss", model=ScriptedModel([ask, "proceeding"]))
    def boss() -> str:
        turnkit.use_tool("ask")
        return ""

    async with app:
        subscriber = await app.create_session("boss")
        await app.wait((await app.send(subscriber.id, text="start")).turn_id, timeout=10)
        await app.subscribe(subscriber.id, to_agent="worker")
        job = await app.create_session("worker")
        await app.wait((await app.send(job.id, text="work")).turn_id, timeout=10)
        received = (await app.events(subscriber.id))[-1]
        assert received.type == "input.received" and received.data["held"] is True
        turn = await app.wait((await app.send(subscriber.id, text="yes")).turn_id, timeout=10)
        (steer,) = turn.input.steering
        assert steer.source == "event"


async def test_subscriptions_are_checked_and_can_be_removed(db_url: str) -> None:
    app = App(db_url)

    @app.agent("a", model=ScriptedModel(["x"] * 3))
    def a() -> str:
        return ""

    async with app:
        one, two = await app.create_session("a"), await app.create_session("a")
        with pytest.raises(InvalidInputError, match="exactly one"):
            await app.subscribe(one.id)
        with pytest.raises(UnknownAgentError):
            await app.subscribe(one.id, to_agent="ghost")
        with pytest.raises(SessionNotFoundError):
            await app.subscribe(one.id, to_session="ses_ghost")
        await app.subscribe(one.id, to_session=two.id)
        assert await app.unsubscribe(one.id, to_session=two.id) is True
        assert await app.unsubscribe(one.id, to_session=two.id) is False
        await app.wait((await app.send(two.id, text="hi")).turn_id, timeout=10)
        assert [e.type for e in await app.events(one.id)] == []


async def test_concurrent_subscribes_make_one_subscription_that_unsubscribe_ends(
    any_db_url: str,
) -> None:
    import asyncio

    app = App(any_db_url)

    @app.agent("a", model=ScriptedModel(["x"] * 3))
    def a() -> str:
        return ""

    async with app:
        one, two = await app.create_session("a"), await app.create_session("a")
        ids = await asyncio.gather(
            *(app.subscribe(one.id, to_session=two.id) for _ in range(8)),
            *(app.subscribe(one.id, to_agent="a") for _ in range(8)),
        )
        assert len(set(ids[:8])) == 1 and len(set(ids[8:])) == 1
        assert await app.unsubscribe(one.id, to_session=two.id) is True
        assert await app.unsubscribe(one.id, to_agent="a") is True
        await app.wait((await app.send(two.id, text="hi")).turn_id, timeout=10)
        assert [e.type for e in await app.events(one.id)] == []  # no outcome arrives


async def test_upgrading_to_schema_4_removes_duplicate_subscriptions(any_db_url: str) -> None:
    import sqlalchemy as sa

    from turnkit.sessions.db import schema
    from turnkit.sessions.db.engines import Databases

    app = App(any_db_url)
    app.agent("a", model=ScriptedModel([]))(lambda: "")
    async with app:
        one, two = await app.create_session("a"), await app.create_session("a")
    databases = Databases(any_db_url)
    try:
        with databases.write.begin() as conn:  # back to version 3, with duplicates
            conn.execute(sa.text("DROP INDEX uq_turnkit_subs_to_session"))
            conn.execute(sa.text("DROP INDEX uq_turnkit_subs_to_agent"))
            conn.execute(sa.text("DROP TABLE turnkit_webhook_deliveries"))
            # and what versions 7, 8 and 10 added, so each step runs again
            conn.execute(sa.text("DROP INDEX ix_turnkit_live_done"))
            conn.execute(sa.text("DROP INDEX ix_turnkit_inputs_steering"))
            conn.execute(sa.text("ALTER TABLE turnkit_live DROP COLUMN done_at"))
            conn.execute(sa.text("ALTER TABLE turnkit_sessions DROP COLUMN last_activity_at"))
            conn.execute(sa.text("UPDATE turnkit_meta SET value = '3'"))
            for n, target in enumerate([two.id, two.id, None, None]):
                conn.execute(
                    schema.subscriptions.insert().values(
                        id=f"sub_{n}",
                        subscriber_id=one.id,
                        to_session=target,
                        to_agent=None if target else "a",
                        created_at=0.0,
                    )
                )
        assert schema.migrate(databases.write) == schema.SCHEMA_VERSION
        with databases.read.begin() as conn:
            rows = conn.execute(sa.select(schema.subscriptions.c.id)).scalars().all()
            assert sorted(rows) == ["sub_0", "sub_2"]
            assert conn.execute(sa.select(schema.webhook_deliveries)).all() == []
        with pytest.raises(sa.exc.IntegrityError), databases.write.begin() as conn:
            conn.execute(
                schema.subscriptions.insert().values(
                    id="sub_9", subscriber_id=one.id, to_session=two.id, created_at=0.0
                )
            )
    finally:
        databases.dispose()


def delegating_app(db_url: str, parent_replies: list, child_replies: list, wait: bool) -> App:
    app = App(db_url)
    research = turnkit.subagent("researcher", "Find facts about a topic.", wait=wait)

    @app.agent("researcher", model=ScriptedModel(child_replies))
    def researcher() -> str:
        turnkit.use_tool("ask")
        return "Research."

    @app.agent("lead", model=ScriptedModel(parent_replies), tools=[research])
    def lead() -> str:
        return "Lead."

    return app


async def test_subagent_waits_for_the_child_and_returns_its_reply(db_url: str) -> None:
    parent_replies = [call("researcher", {"task": "Find X", "payload": {"depth": 2}}), "X is 42."]
    app = delegating_app(db_url, parent_replies, ["The answer is 42."], wait=True)
    async with app:
        parent = await app.create_session("lead")
        turn = await app.wait((await app.send(parent.id, text="What is X?")).turn_id, timeout=20)
        assert turn.output == "X is 42."
        history = await app.history(parent.id)
        result = history[2].content[0]
        assert not result.is_error and result.content == "The answer is 42."
        child = await app.get_session(
            (await app.create_session("researcher", key=f"subagent:{turn.id}:c1")).id
        )
        assert child.parent_id == parent.id
        (child_turn_event,) = [e for e in await app.events(child.id) if e.type == "turn.completed"]
        child_turn = await app.wait(child_turn_event.turn_id, timeout=5)
        assert child_turn.input.source == "subagent" and child_turn.input.text == "Find X"
        assert child_turn.input.payload == {"depth": 2}


async def test_a_child_that_asks_surfaces_its_question_to_the_parent(db_url: str) -> None:
    ask = call("ask", {"question": "Which X?"}, "q1")
    app = delegating_app(
        db_url, [call("researcher", {"task": "Find X"}), "I need to know."], [ask], wait=True
    )
    async with app:
        parent = await app.create_session("lead")
        turn = await app.wait((await app.send(parent.id, text="What is X?")).turn_id, timeout=20)
        result = (await app.history(parent.id))[2].content[0]
        assert "asked a question" in result.content and "Which X?" in result.content
        assert "answers=" in result.content and turn.status == "completed"


async def test_subagent_without_waiting_reports_back_as_an_event(db_url: str) -> None:
    replies = [call("researcher", {"task": "Find X"}), "Started it.", "Got the result."]
    app = delegating_app(db_url, replies, ["X is 42."], wait=False)
    async with app:
        parent = await app.create_session("lead")
        first = await app.wait((await app.send(parent.id, text="Find X")).turn_id, timeout=20)
        ids = json.loads((await app.history(parent.id))[2].content[0].content)
        assert set(ids) == {"session_id", "turn_id"}
        assert first.output == "Started it."
        completed = await events_of_type(app, parent.id, "turn.completed", 2)
        later = await app.wait(completed[1].turn_id, timeout=10)
        assert later.input.source == "event"
        assert later.input.event.session_id == ids["session_id"]
        assert later.input.event.result.text == "X is 42."


async def test_subagent_outside_a_session_is_an_error_result() -> None:
    research = turnkit.subagent("researcher", "Find facts.")
    agent = turnkit.Agent(
        turnkit.AgentConfig(
            "solo", model=ScriptedModel([call("researcher", {"task": "t"}), "ok"]), tools=[research]
        )
    )
    result = await agent.run("go")
    tool_result = result.messages[1].content[0]
    assert tool_result.is_error and "only in an App session" in tool_result.content


async def test_structured_output_is_stored_with_the_turn(db_url: str) -> None:
    from pydantic import BaseModel

    class Verdict(BaseModel):
        approve: bool
        reason: str

    app = App(db_url)
    model = ScriptedModel(['{"approve": "maybe"}', '{"approve": true, "reason": "fine"}'])

    @app.agent("judge", model=model, output_type=Verdict)
    def judge() -> str:
        return "Decide."

    async with app:
        session = await app.create_session("judge")
        turn = await app.wait((await app.send(session.id, text="ok?")).turn_id, timeout=10)
        assert turn.status == "completed"
        assert turn.output_data == {"approve": True, "reason": "fine"}
        completed = (await app.events(session.id))[-1]
        assert completed.data["output_data"] == {"approve": True, "reason": "fine"}
        assert (
            "final_result" in model.requests[0].tool_names
        )  # the scripted model has no native mode
        assert "not accepted" in turnkit.message_text_body(model.requests[1].messages[-1])


class ListedTools:
    """A tool source (what an MCP server is to an agent): tools listed at call time."""

    def __init__(self, name: str) -> None:
        self.name, self.listed = name, 0

    async def list_tools(self) -> tuple:
        self.listed += 1

        def shout(text: str) -> str:
            """Shout it."""
            return text.upper()

        return (turnkit.tool(name=self.name)(shout),)


async def test_tool_sources_in_agent_tools_and_use_tool(db_url: str) -> None:
    source, offered = ListedTools("shout"), ListedTools("yell")
    app = App(db_url)
    model = ScriptedModel([call("shout", {"text": "hi"}), "done"])

    @app.agent("loud", model=model, tools=[source])
    def loud() -> str:
        turnkit.use_tool(offered)
        return ""

    async with app:
        session = await app.create_session("loud")
        turn = await app.wait((await app.send(session.id, text="x")).turn_id, timeout=10)
        assert turn.output == "done", turn.error
        assert (await app.history(session.id))[2].content[0].content == "HI"
        assert source.listed == 2 and offered.listed == 2  # before each model call
        assert model.requests[0].tool_names == ("shout", "yell")
