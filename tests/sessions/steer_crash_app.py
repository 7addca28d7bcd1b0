"""A session app whose model call a steered input meets, run as a child process by
the busy crash tests, then killed with SIGKILL.

    python steer_crash_app.py DB MODE

MODE "in-call": while the turn's model call runs, send an input with
on_busy="steer"; print the turn id and the input id, and wait to be killed
(the call never returns).
MODE "after-end": as "in-call", then let the call return: the turn ends
without reading the input, whose own turn starts and blocks in its model
call (printing "model called") until killed.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading

from turnkit.sessions import App
from turnkit.testing import ScriptedModel


def build(db: str, model: ScriptedModel) -> App:
    app = App(f"sqlite:///{db}", executor_id="child", lease_seconds=2, fire_schedules=False)

    @app.agent("painter", model=model)
    def painter() -> str:
        return "Paint."

    return app


async def main(db: str, mode: str) -> None:
    entered, release = threading.Event(), threading.Event()

    def first_call(request: object) -> str:
        entered.set()
        release.wait()
        return "Red it is."

    def blocking_call(request: object) -> str:
        print("model called", flush=True)
        threading.Event().wait()
        return "never"

    app = build(db, ScriptedModel([first_call, blocking_call]))
    async with app:
        session = await app.create_session("painter", key="crash")
        first = await app.send(session.id, text="paint it")
        await asyncio.to_thread(entered.wait)
        steer = await app.send(session.id, text="the blue one", on_busy="steer")
        print(json.dumps([first.turn_id, steer.input_id, steer.status]), flush=True)
        if mode == "after-end":
            release.set()
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
