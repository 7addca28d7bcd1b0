"""Live deltas from each provider's real streaming API (the loopback fakes) and the local model."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from fakes import Reply, Text, Thinking, ToolCall
from fakes.models import REMOTES, serve
from turnkit.messages import Message, thaw
from turnkit.sessions import App, Event, LiveEvent

TIMEOUT = 25
THOUGHT = "The user wants order 42; I will look it up first."
SAID = "Let me check order 42 for you."
FINAL = "Order 42 shipped on Monday and arrives tomorrow."


def lookup(order: str, detail: str) -> str:
    """Look up an order."""
    return "shipped Monday"


async def run_turn(
    db_url: str, model: Any, tools: Any = (lookup,), **options: Any
) -> list[Event | LiveEvent]:
    app = App(db_url, fire_schedules=False)
    app.agent("support", model=model, tools=tools, **options)(lambda: "Help with orders.")
    items: list[Event | LiveEvent] = []
    async with app:
        session = await app.create_session("support")

        async def read() -> None:
            async for item in app.follow(session.id, live=True):
                items.append(item)
                if isinstance(item, Event) and item.type in ("turn.completed", "turn.failed"):
                    return

        reading = asyncio.ensure_future(asyncio.wait_for(read(), TIMEOUT))
        while not app.runtime.live.followers and not reading.done():
            await asyncio.sleep(0.005)  # subscribed before the turn starts
        await app.send(session.id, text="Where is order 42?")
        await reading
    return items


def replies(items: list[Any]) -> list[Message]:
    return [
        Message.from_dict(i.data["message"])
        for i in items
        if isinstance(i, Event) and i.type == "message" and i.data["message"]["role"] == "assistant"
    ]


def joined(items: list[Any], after_seq: int, kind: str) -> str:
    return "".join(
        i.data["text"]
        for i in items
        if isinstance(i, LiveEvent) and i.after_seq == after_seq and i.type == kind
    )


@pytest.mark.parametrize("provider", sorted(REMOTES))
async def test_deltas_join_to_each_reply_for_every_provider(db_url: str, provider: str) -> None:
    call = ToolCall("lookup", {"order": "42", "detail": "schedule — ünïcode"})
    script = (Reply([Thinking(THOUGHT), Text(SAID), call]), Reply(FINAL))
    with serve(provider) as (fake, model):
        fake.script(*script)
        items = await run_turn(db_url, model, thinking=True)
    assert items[-1].type == "turn.completed", items[-1]
    first, second = replies(items)
    calls = sorted({i.after_seq for i in items if isinstance(i, LiveEvent)})
    assert len(calls) == 2  # both model calls streamed
    thinking = "".join(b.thinking for b in first.content if b.type == "thinking")
    assert joined(items, calls[0], "thinking.delta") == thinking
    assert joined(items, calls[0], "text.delta") == first.text
    (tool_use,) = [b for b in first.content if b.type == "tool_use"]
    tool_input = joined(items, calls[0], "tool_input.delta")
    assert json.loads(tool_input) == {"order": "42", "detail": "schedule — ünïcode"}
    assert dict(tool_use.input) == json.loads(tool_input)
    assert joined(items, calls[1], "text.delta") == second.text == FINAL


async def test_deltas_join_to_the_local_models_reply(db_url: str) -> None:
    items = await run_turn(db_url, "local", tools=(), max_output_tokens=32)
    assert items[-1].type == "turn.completed", items[-1]
    (reply,) = replies(items)
    live = [i for i in items if isinstance(i, LiveEvent)]
    assert reply.text and {i.type for i in live} == {"text.delta"}
    assert joined(items, live[0].after_seq, "text.delta") == reply.text


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai-responses"])
async def test_a_tool_calls_input_streams_live_in_pieces(db_url: str, provider: str) -> None:
    detail = "the delivery schedule, the carrier and every stop on the way — " * 3
    call = ToolCall("lookup", {"order": "42", "detail": detail})
    with serve(provider) as (fake, model):
        fake.script(Reply([Text(SAID), call]), Reply(FINAL))
        items = await run_turn(db_url, model)
    assert items[-1].type == "turn.completed", items[-1]
    (tool_use,) = [b for b in replies(items)[0].content if b.type == "tool_use"]
    live = [i for i in items if isinstance(i, LiveEvent) and i.type == "tool_input.delta"]
    assert len(live) > 1
    assert {(i.data["call_id"], i.data["name"]) for i in live} == {(tool_use.id, "lookup")}
    assert json.loads("".join(i.data["text"] for i in live)) == thaw(tool_use.input)
