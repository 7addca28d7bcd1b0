"""A live-output app run as a child process by the kill -9 tests, then killed.

    python live_crash_app.py DB MODE

MODE "stream": send one input whose reply streams five pieces, then stops
mid-message (printing "held") until killed: the reply is never recorded.
MODE "recorded": send one input whose streamed reply calls a tool that
prints "tool started" and blocks until killed: the reply is recorded.
The turn's id is printed first, as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

import turnkit
from turnkit.messages import Message, TextBlock, ToolUseBlock
from turnkit.sessions import App
from turnkit.testing import StreamingScriptedModel

FIRST_TRY = "First try: this text never finishes streaming."
CALL = Message.assistant(TextBlock("Checking."), ToolUseBlock("call_1", "block", {"x": 1}))


class Announced(threading.Event):
    """A hold that says when the stream reaches it."""

    def wait(self, timeout: float | None = None) -> bool:
        print("held", flush=True)
        return super().wait(timeout)


def build(db: str, model: Any, block: bool, **options: Any) -> App:
    options = {"executor_id": "child", "fire_schedules": False, **options}
    app = App(f"sqlite:///{db}", **options)

    @turnkit.tool(name="block")
    def block_tool(x: int) -> str:
        """Block."""
        print("tool started", flush=True)
        if block:
            threading.Event().wait()
        return "unblocked"

    app.agent("writer", model=model, tools=[block_tool])(lambda: "Write.")
    return app


async def main(db: str, mode: str) -> None:
    if mode == "stream":
        model = StreamingScriptedModel([FIRST_TRY], chunk=2, hold=Announced(), hold_after=5)
    else:
        model = StreamingScriptedModel([CALL, "never"], chunk=2)
    app = build(db, model, block=True)
    async with app:
        session = await app.create_session("writer")
        receipt = await app.send(session.id, text="Go")
        print(json.dumps([receipt.turn_id]), flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
