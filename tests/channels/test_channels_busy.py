"""Channels use their agent's ``on_busy`` (SPEC section 7, "Input while busy").

A Slack thread whose agent merges: the messages posted while it works are
answered together in one turn. A Linear session whose agent steers: a prompt
sent while it works is read by the running turn.
"""

from __future__ import annotations

import asyncio
from typing import Any

import turnkit
from fakes.linear import FakeLinear
from fakes.slack import FakeSlack
from sessions.busy_support import WORK, Gate, reads
from turnkit.messages import message_text_body
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

from ._support import (
    BOT,
    LINEAR_SECRET,
    SLACK_SECRET,
    linear_created,
    linear_prompted,
    linear_request,
    mention,
    slack_event,
    slack_request,
)


def gated_agent(app: App, gate: Gate, model: ScriptedModel, on_busy: str) -> None:
    @turnkit.tool
    async def work() -> str:
        """Do the work (waits for the test)."""
        await asyncio.to_thread(gate.pass_through)
        return "done"

    @app.agent("helper", model=model, tools=[work], on_busy=on_busy)
    def helper() -> str:
        return "Help."


async def turn_started(app: App, session_id: str, count: int) -> list[Any]:
    """The first ``count`` turn.started events of the session, as they come."""
    started = []
    async with asyncio.timeout(20):
        async for event in app.follow(session_id):
            if event.type == "turn.started":
                started.append(event)
                if len(started) == count:
                    return started
    raise AssertionError(f"fewer than {count} turns started")


async def test_slack_messages_posted_while_the_agent_works_merge_into_one_turn(
    db_url: str,
) -> None:
    gate = Gate()
    model = ScriptedModel([WORK, "Red is done.", "Both noted."])
    with FakeSlack() as fake:
        app = App(db_url, fire_schedules=False)
        gated_agent(app, gate, model, on_busy="merge")
        app.slack("helper", SLACK_SECRET, fake.api_key, api_url=fake.api_url)
        root = "1700000000.000100"

        async def post(text: str, ts: str) -> Any:
            headers, body = slack_request(slack_event(mention(f"<@{BOT}> {text}", ts, root)))
            return await app.handle_channel("slack", headers, body)

        async with app:
            first = await post("paint the door", root)
            await gate.wait_entered()
            await post("the blue one", "1700000001.000100")
            await post("and the frame", "1700000002.000100")
            gate.open()
            session_id = first.body["session_id"]
            _, merged = await turn_started(app, session_id, 2)
            turn = await app.wait(merged.turn_id, timeout=20)
            posts = await asyncio.to_thread(fake.wait_for_posts, 2)
            events = await app.events(session_id)
    assert turn.input.text == "the blue one"
    assert [m.text for m in turn.input.merged] == ["and the frame"]
    assert turn.input.merged[0].channel == turn.input.channel  # the same thread, kept
    assert [e.type for e in events].count("turn.started") == 2
    body = message_text_body(model.requests[-1].messages[-1])
    assert body.index("the blue one") < body.index("and the frame")
    assert [p.text for p in posts] == ["Red is done.", "Both noted."]
    assert reads(model, "and the frame") == 1


async def test_a_linear_prompt_sent_while_the_agent_works_steers_the_running_turn(
    db_url: str,
) -> None:
    gate = Gate()
    model = ScriptedModel([WORK, lambda r: f"read: {r.last_text}"])
    with FakeLinear() as fake:
        app = App(db_url, fire_schedules=False)
        gated_agent(app, gate, model, on_busy="steer")
        app.linear("helper", LINEAR_SECRET, fake.api_key, api_url=fake.api_url)

        async def deliver(payload: dict[str, Any]) -> Any:
            headers, body = linear_request(payload)
            return await app.handle_channel("linear", headers, body)

        async with app:
            created = await deliver(linear_created())
            await gate.wait_entered()
            prompted = await deliver(linear_prompted("check the EU region too", "act-2"))
            session_id = created.body["session_id"]
            assert prompted.body["session_id"] == session_id
            gate.open()
            (started,) = await turn_started(app, session_id, 1)
            turn = await app.wait(started.turn_id, timeout=20)
            events = await app.events(session_id)
    (steered,) = [e for e in events if e.type == "input.steered"]
    assert steered.data == {"input_id": prompted.body["input_id"], "turn_id": turn.id}
    assert turn.status == "completed" and "check the EU region too" in turn.output
    assert [e.type for e in events].count("turn.started") == 1
    assert reads(model, "check the EU region too") == 1
