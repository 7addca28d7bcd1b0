"""What the input-while-busy tests share: a gate the test opens, a painter agent
whose tool waits on it, and ways to count what the model read."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import turnkit
from turnkit.messages import message_text_body
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

WORK = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Painting it red."},
        {"type": "tool_use", "id": "w1", "name": "work", "input": {}},
    ],
}

ASK = {
    "role": "assistant",
    "content": [
        {"type": "tool_use", "id": "ask_1", "name": "ask", "input": {"question": "Which?"}},
    ],
}


class Gate:
    """A tool (or a model reply) that says it was entered, then waits until opened."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()

    def pass_through(self) -> None:
        self.entered.set()
        assert self.opened.wait(20), "the test never opened the gate"

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, 20), "nothing reached the gate"

    def open(self) -> None:
        self.opened.set()


def busy_app(db_url: str, replies: list, gate: Gate, **agent: Any) -> tuple[App, ScriptedModel]:
    """An app with one agent, ``painter``, whose ``work`` tool passes through ``gate``."""
    app = App(db_url, fire_schedules=False)
    model = ScriptedModel(replies)

    @turnkit.tool
    async def work() -> str:
        """Do the work (waits for the test)."""
        await asyncio.to_thread(gate.pass_through)
        return "done"

    @app.agent("painter", model=model, tools=[work], **agent)
    def painter() -> str:
        turnkit.use_tool("ask")
        return "Paint what you are asked to."

    return app, model


def gated_reply(gate: Gate, reply: Any) -> Any:
    """A scripted reply that waits on ``gate`` (the model is mid-call until it opens)."""

    async def respond(request: Any) -> Any:
        await asyncio.to_thread(gate.pass_through)
        return reply

    return respond


def texts(request: Any) -> list[str]:
    return [message_text_body(m) for m in request.messages]


def reads(model: ScriptedModel, text: str) -> int:
    """In how many user messages the model was ever shown ``text`` (once per message)."""
    seen = set()
    for request in model.requests:
        for message in request.messages:
            if message.role == "user" and text in message_text_body(message):
                seen.add(repr(message.to_dict()))
    return len(seen)


async def turn_inputs(app: App, session_id: str) -> list[str]:
    """The ids of the inputs that started turns, in order."""
    events = await app.events(session_id)
    return [e.data["input"]["id"] for e in events if e.type == "turn.started"]


async def started_texts(app: App, session_id: str) -> list[str | None]:
    """The texts of the inputs that started turns, in order."""
    events = await app.events(session_id)
    return [e.data["input"]["text"] for e in events if e.type == "turn.started"]
