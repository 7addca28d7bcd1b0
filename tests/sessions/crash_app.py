"""A session app run as a child process by the crash tests, then killed with SIGKILL.

    python crash_app.py DB MODE [idempotent]

MODE "tool": send one input whose turn calls a tool that records that it ran
and then blocks; print the turn id and wait to be killed.
MODE "sends": send ten inputs to one session, print their turn ids, and wait
to be killed (the parent kills it as soon as the ids are printed).
MODE "paused-start": send one input, and stop between its commit and the
start of its session's runner (printing the runner id) until killed.
MODE "steer": while a turn's tool runs, send an input with on_busy="steer";
print the turn id and the input id, and wait to be killed (the tool still runs).
MODE "steer-delivered": as "steer", then let the tool finish: the next model
call takes the input in and blocks (printing "model called") until killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from pathlib import Path

import turnkit
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

TOOL_CALL = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "call_1", "name": "record", "input": {}}],
}


def build(
    db: str, marker: Path, idempotent: bool, model: ScriptedModel, block: bool, **options: object
) -> App:
    options.setdefault("lease_seconds", 2)  # a restart under the same id waits for it
    app = App(f"sqlite:///{db}", **options)

    @turnkit.tool(idempotent=idempotent)
    def record() -> str:
        """Record that the tool ran."""
        with marker.open("a") as out:
            out.write("ran\n")
        print("tool started", flush=True)
        if block:
            threading.Event().wait()
        return "recorded"

    @app.agent("worker", model=model, tools=[record])
    def worker() -> str:
        return "Work."

    return app


def slow_echo(request: object) -> str:
    time.sleep(0.02)
    return f"echo:{request.last_text}"  # type: ignore[attr-defined]


def delegating(db: str, lead_replies: list, child_replies: list, **options: object) -> App:
    """A lead agent whose tool runs a task in a researcher's child session, waiting for it."""
    options.setdefault("lease_seconds", 2)
    app = App(f"sqlite:///{db}", **options)
    research = turnkit.subagent("researcher", "Research a topic.")

    @app.agent("researcher", model=ScriptedModel(child_replies))
    def researcher() -> str:
        return "Research."

    @app.agent("lead", model=ScriptedModel(lead_replies), tools=[research])
    def lead() -> str:
        return "Lead."

    return app


def child_blocks(request: object) -> str:
    print("child running", flush=True)
    threading.Event().wait()
    return "never"


DELEGATE = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "d1", "name": "researcher", "input": {"task": "dig"}}],
}


def blocking_reply(request: object) -> str:
    print("model called", flush=True)
    threading.Event().wait()
    return "never"


async def steer_while_busy(db: str, marker: Path, delivered: bool) -> None:
    started, release = threading.Event(), threading.Event()
    app = App(f"sqlite:///{db}", executor_id="child")

    @turnkit.tool
    def record() -> str:
        """Record that the tool ran."""
        with marker.open("a") as out:
            out.write("ran\n")
        started.set()
        release.wait()
        return "recorded"

    @app.agent("worker", model=ScriptedModel([TOOL_CALL, blocking_reply]), tools=[record])
    def worker() -> str:
        return "Work."

    async with app:
        session = await app.create_session("worker", key="crash")
        first = await app.send(session.id, text="paint it")
        await asyncio.to_thread(started.wait)
        steer = await app.send(session.id, text="the blue one", on_busy="steer")
        print(json.dumps([first.turn_id, steer.input_id, steer.status]), flush=True)
        if delivered:
            release.set()
        await asyncio.Event().wait()


async def main(db: str, mode: str, idempotent: bool) -> None:
    marker = Path(db).with_suffix(".marker")
    if mode in ("steer", "steer-delivered"):
        await steer_while_busy(db, marker, delivered=mode == "steer-delivered")
    if mode == "subagent":
        app = delegating(db, [DELEGATE], [child_blocks], executor_id="child")
        async with app:
            session = await app.create_session("lead")
            receipt = await app.send(session.id, text="research this")
            print(json.dumps([receipt.turn_id]), flush=True)
            await asyncio.Event().wait()
    if mode == "paused-start":  # the input commits, its runner never starts: then killed
        from turnkit.sessions.runtime.dispatch import Dispatcher

        def pause(runner_id: str) -> None:
            print(json.dumps([runner_id]), flush=True)
            threading.Event().wait()

        Dispatcher.before_start = pause
    if mode == "tool":
        app = build(
            db, marker, idempotent, ScriptedModel([TOOL_CALL]), block=True, executor_id="child"
        )
    else:
        model = ScriptedModel([slow_echo] * 20)
        app = build(db, marker, idempotent, model, block=False, executor_id="child")
    async with app:
        session = await app.create_session("worker", key="crash")
        count = 1 if mode == "tool" else 10
        receipts = [await app.send(session.id, text=f"m{i}") for i in range(count)]
        print(json.dumps([r.turn_id for r in receipts]), flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], len(sys.argv) > 3))
