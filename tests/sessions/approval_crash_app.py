"""A session app with a refund tool behind approval, run as a child process and killed.

    python approval_crash_app.py DATABASE_URL MARKER MODE [idempotent]

Each mode first runs a turn whose refund call is held (the question is asked),
prints the session id as a JSON list, then:
MODE "held": waits to be killed (before any decision).
MODE "decided": approves, and stops between the decision's commit and the start
of the turn that runs the call (printing "decided") until killed.
MODE "denied": as "decided", with a denial ("too much") instead.
MODE "running": approves; the refund records that it ran in MARKER, prints
"tool started" and blocks until killed.
MODE "ran": approves; the refund runs and returns, then the turn's next model
call prints "model called" and blocks until killed.
MODE "neighbour": the first turn's reply also calls ``lookup`` (no approval
needed), which prints "lookup started" and blocks until killed: the kill
comes before the question is asked (nothing is printed before it).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from pathlib import Path
from typing import Any

import turnkit
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

REFUND = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "r1", "name": "refund", "input": {"order_id": "42"}}],
}
LOOKUP = {"type": "tool_use", "id": "l1", "name": "lookup", "input": {"order_id": "42"}}
WITH_LOOKUP = {"role": "assistant", "content": [LOOKUP, *REFUND["content"]]}


def build(
    url: str,
    marker: Path,
    idempotent: bool,
    model: ScriptedModel,
    block: bool,
    block_lookup: bool = False,
) -> App:
    # lease_seconds: a restart under the same executor id waits for the lease to lapse
    app = App(url, executor_id="child", lease_seconds=2)

    @turnkit.tool(needs_approval=True, idempotent=idempotent)
    def refund(order_id: str) -> str:
        """Refund an order; records each run."""
        with marker.open("a") as out:
            out.write("ran\n")
        if block:
            print("tool started", flush=True)
            threading.Event().wait()
        return f"refunded {order_id}"

    @turnkit.tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        if block_lookup:
            print("lookup started", flush=True)
            threading.Event().wait()
        return f"order {order_id}: paid"

    @app.agent("support", model=model, tools=[refund, lookup])
    def support() -> str:
        return "Help with refunds."

    return app


def blocking_reply(request: Any) -> str:
    print("model called", flush=True)
    threading.Event().wait()
    return "never"


def no_linger() -> None:
    """The first turn's runner ends with it, so the deciding turn starts a runner of its own."""
    from turnkit.sessions.runtime import lingering

    lingering.RUNNER_LINGER_S = 0


def pause_before_the_deciding_turn() -> None:
    """The deciding input commits; the runner of its turn never starts (then killed)."""
    from turnkit.sessions.runtime.dispatch import Dispatcher

    def pause(runner_id: str) -> None:
        print("decided", flush=True)
        threading.Event().wait()

    Dispatcher.before_start = pause


async def main(url: str, marker: Path, mode: str, idempotent: bool) -> None:
    replies: list[Any] = [REFUND, blocking_reply] if mode == "ran" else [REFUND]
    if mode in ("decided", "denied"):
        no_linger()
    if mode == "neighbour":
        replies = [WITH_LOOKUP]
    model = ScriptedModel(replies)
    app = build(url, marker, idempotent, model, mode == "running", mode == "neighbour")
    async with app:
        session = await app.create_session("support", key="crash")
        if mode == "neighbour":
            print(json.dumps([session.id]), flush=True)
        receipt = await app.send(session.id, text="refund order 42")
        turn = await app.wait(receipt.turn_id, timeout=30)
        assert turn.question is not None and turn.question.approvals
        print(json.dumps([session.id]), flush=True)
        if mode in ("decided", "denied"):
            pause_before_the_deciding_turn()
        if mode in ("decided", "running", "ran"):
            await app.approve(session.id, True)
        if mode == "denied":
            await app.approve(session.id, False, reason="too much")
        await asyncio.Event().wait()


if __name__ == "__main__":
    url, marker, mode = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    asyncio.run(main(url, marker, mode, len(sys.argv) > 4))
