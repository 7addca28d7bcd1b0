"""Approvals through the channels: the held call is posted like an ask, a reply decides."""

from __future__ import annotations

import asyncio
from typing import Any

import turnkit
from fakes.linear import FakeLinear
from fakes.slack import FakeSlack
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
    message,
    slack_event,
    slack_request,
)

REFUND = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "I will refund it."},
        {"type": "tool_use", "id": "r1", "name": "refund", "input": {"order_id": "42"}},
    ],
}


def refund_app(db_url: str, refunded: list[str]) -> tuple[App, ScriptedModel]:
    app = App(db_url)
    again = {**REFUND, "content": [{**REFUND["content"][1], "id": "r2"}]}
    model = ScriptedModel([REFUND, "Refunded order 42.", again, "Not refunded."])

    @turnkit.tool(needs_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        refunded.append(order_id)
        return f"refunded {order_id}"

    @app.agent("support", model=model, tools=[refund])
    def support() -> str:
        return "Help with refunds."

    return app, model


async def decided_events(app: App, session_id: str, count: int) -> list[Any]:
    found: list[Any] = []
    async with asyncio.timeout(15):
        async for event in app.follow(session_id):
            if event.type == "approval.decided":
                found.append(event)
            if event.type == "turn.completed" and len(found) == count:
                return found
    raise AssertionError("no decision")


async def test_slack_posts_the_request_in_the_thread_and_a_reply_decides(any_db_url: str) -> None:
    refunded: list[str] = []
    with FakeSlack() as fake:
        app, _ = refund_app(any_db_url, refunded)
        app.slack("support", SLACK_SECRET, fake.api_key, api_url=fake.api_url)
        async with app:
            root = "1700000000.000100"
            headers, body = slack_request(slack_event(mention(f"<@{BOT}> refund 42", root)))
            first = await app.handle_channel("slack", headers, body)
            session_id = first.body["session_id"]
            posts = await asyncio.to_thread(fake.wait_for_posts, 1)
            assert posts[0].thread_ts == root
            assert "refund" in posts[0].text and '{"order_id": "42"}' in posts[0].text
            assert "*approve* or *deny*" in posts[0].text
            assert refunded == []

            reply = slack_event(message("Approve", "1700000100.000100", root, user="U7"))
            headers, body = slack_request(reply)
            await app.handle_channel("slack", headers, body)
            (decided,) = await decided_events(app, session_id, 1)
            posts = await asyncio.to_thread(fake.wait_for_posts, 2)
            assert posts[1].text == "Refunded order 42."

            again = slack_event(mention(f"<@{BOT}> refund it again", "1700000200.000100", root))
            headers, body = slack_request(again)
            await app.handle_channel("slack", headers, body)
            await asyncio.to_thread(fake.wait_for_posts, 3)
            deny = slack_event(message("not without a receipt", "1700000300.000100", root))
            headers, body = slack_request(deny)
            await app.handle_channel("slack", headers, body)
            denied = (await decided_events(app, session_id, 2))[1]
    assert refunded == ["42"]
    assert decided.data["approved"] is True and decided.data["user_id"] == "U7"
    assert decided.data["source"] == "channel"
    assert denied.data["approved"] is False
    assert denied.data["reason"] == "not without a receipt" and denied.data["user_id"] == "U1"


async def test_linear_asks_with_an_elicitation_and_the_prompt_decides(any_db_url: str) -> None:
    refunded: list[str] = []
    with FakeLinear(sessions=("as-1",)) as fake:
        app, _model = refund_app(any_db_url, refunded)
        app.linear("support", LINEAR_SECRET, fake.api_key, api_url=fake.api_url)
        async with app:
            headers, body = linear_request(linear_created())
            created = await app.handle_channel("linear", headers, body)
            session_id = created.body["session_id"]
            activities = await asyncio.to_thread(fake.wait_for_activities, 2)
            kinds = [a.content["type"] for a in activities]
            assert kinds == ["thought", "elicitation"]  # the held call is no action: it did not run
            elicitation = activities[1].content["body"]
            assert '{"order_id": "42"}' in elicitation and "- Approve\n- Deny" in elicitation
            assert refunded == []

            headers, body = linear_request(linear_prompted("approve", "act-1"))
            await app.handle_channel("linear", headers, body)
            (decided,) = await decided_events(app, session_id, 1)
            activities = await asyncio.to_thread(fake.wait_for_activities, 3)
            assert activities[-1].content == {"type": "response", "body": "Refunded order 42."}

            headers, body = linear_request(linear_prompted("refund it again", "act-2"))
            await app.handle_channel("linear", headers, body)
            activities = await asyncio.to_thread(fake.wait_for_activities, 4)
            assert activities[-1].content["type"] == "elicitation"
            headers, body = linear_request(linear_prompted("deny", "act-3"))
            await app.handle_channel("linear", headers, body)
            denied = (await decided_events(app, session_id, 2))[1]
            activities = await asyncio.to_thread(fake.wait_for_activities, 5)
    assert refunded == ["42"]  # the denied call never ran
    assert decided.data["user_id"] == "user-9" and decided.data["approved"] is True
    assert decided.data["source"] == "channel"
    assert denied.data["approved"] is False and denied.data["reason"] is None
    assert activities[-1].content == {"type": "response", "body": "Not refunded."}
    assert [a.content["type"] for a in activities] == [
        "thought",
        "elicitation",
        "response",
        "elicitation",
        "response",
    ]
