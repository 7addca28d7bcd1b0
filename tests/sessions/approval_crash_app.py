"""A session app with a refund tool behind approval, run as a child process and killed.

    python approval_crash_app.py DB MODE [idempotent]

Each mode first runs a turn whose refund call is held (the question is asked), then:
MODE "held": prints the session id and waits to be killed (before any decision).
MODE "decided": approves, and stops between the decision's commit and the start
of the turn that runs the call (printing "decided") until killed.
MODE "running": approves; the refund records that it ran, prints "tool started"
and blocks until killed.
The session id is printed first, as a JSON list, in every mode.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path

import turnkit
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

REFUND = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "r1", "name": "refund", "input": {"order_id": "42"}}],
}


def build(db: str, idempotent: bool, model: ScriptedModel, block: bool) -> App:
    app = App(f"sqlite:///{db}", executor_id="child")
    marker = Path(db).with_suffix(".marker")

    @turnkit.tool(needs_approval=True, idempotent=idempotent)
    def refund(order_id: str) -> str:
        """Refund an order; records each run."""
        with marker.open("a") as out:
            out.write("ran\n")
        if block:
            print("tool started", flush=True)
            threading.Event().wait()
        return f"refunded {order_id}"

    @app.agent("support", model=model, tools=[refund])
    def support() -> str:
        return "Help with refunds."

    return app


async def main(db: str, mode: str, idempotent: bool) -> None:
    if mode == "decided":  # the decision's turn then starts a runner of its own
        from turnkit.sessions.runtime import runner

        runner.RUNNER_LINGER_S = 0
    app = build(db, idempotent, ScriptedModel([REFUND]), block=mode == "running")
    async with app:
        session = await app.create_session("support", key="crash")
        receipt = await app.send(session.id, text="refund order 42")
        turn = await app.wait(receipt.turn_id, timeout=30)
        assert turn.question is not None and turn.question.approvals
        print(json.dumps([session.id]), flush=True)
        if mode == "decided":
            from turnkit.sessions.runtime.dispatch import Dispatcher

            def pause(runner_id: str) -> None:
                print("decided", flush=True)
                threading.Event().wait()

            Dispatcher.before_start = pause
        if mode in ("decided", "running"):
            await app.approve(session.id, True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], len(sys.argv) > 3))
