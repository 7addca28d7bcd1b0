"""A session app that compacts, run as a child process by the crash tests and killed.

    python compaction_crash_app.py DB

Two turns build a conversation; the third compacts it (the summariser
appends "summarised" to DB.marker) and then blocks in its model call,
printing "model blocked" and the turn id, until the parent kills it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import turnkit
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

LINE = "x" * 40  # 10 tokens by the characters / 4 estimate


def build(db: str, model: ScriptedModel, summariser: ScriptedModel, **options: Any) -> App:
    app = App(f"sqlite:///{db}", fire_schedules=False, **options)
    compaction = turnkit.Compaction(max_tokens=45, keep_last=2, model=summariser)

    @app.agent("talker", model=model, compaction=compaction)
    def talker() -> str:
        return "Talk."

    return app


async def blocked(request: object) -> str:
    print("model blocked", flush=True)
    await asyncio.Event().wait()  # until killed
    return "never"


async def main(db: str) -> None:
    marker = Path(db).with_suffix(".marker")

    def summarise(request: object) -> str:
        with marker.open("a") as out:
            out.write("summarised\n")
        return "They talked about x."

    model = ScriptedModel([f"{LINE} a0", f"{LINE} a1", blocked])
    app = build(db, model, ScriptedModel([summarise]), executor_id="child")
    async with app:
        session = await app.create_session("talker", key="crash")
        for i in range(2):
            receipt = await app.send(session.id, text=f"{LINE} q{i}")
            await app.wait(receipt.turn_id, timeout=30)
        receipt = await app.send(session.id, text=f"{LINE} q2")
        print(json.dumps([receipt.turn_id]), flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
