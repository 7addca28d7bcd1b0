"""A session app that compacts, run as a child process by the crash tests and killed.

    python compaction_crash_app.py DB compact|billed

``compact``: two turns build a conversation; the third compacts it by the
characters / 4 estimate. ``billed``: the provider counts each request as
500 tokens, so the second turn compacts although its characters / 4 are
under ``max_tokens``. The compacting turn's summariser appends
"summarised" to DB.marker, then the turn blocks in its model call,
printing "model blocked" and the turn id, until the parent kills it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import turnkit
from turnkit.providers.base import Usage
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

LINE = "x" * 40  # 10 tokens by the characters / 4 estimate
MAX_TOKENS = {"compact": 45, "billed": 100}


class BilledModel(ScriptedModel):
    """A scripted model whose provider counts each request as ``input_tokens``
    (a real tokenizer can count far more than characters / 4)."""

    def __init__(self, replies: list[Any], input_tokens: int) -> None:
        super().__init__(replies)
        self.input_tokens = input_tokens

    async def request(self, request: Any) -> Any:
        response = await super().request(request)
        usage = Usage(self.input_tokens, response.usage.output_tokens)
        return dataclasses.replace(response, usage=usage)


def build(
    db: str, model: ScriptedModel, summariser: ScriptedModel, mode: str = "compact", **options: Any
) -> App:
    app = App(f"sqlite:///{db}", fire_schedules=False, **options)
    compaction = turnkit.Compaction(max_tokens=MAX_TOKENS[mode], keep_last=2, model=summariser)

    @app.agent("talker", model=model, compaction=compaction)
    def talker() -> str:
        return "Talk."

    return app


async def blocked(request: object) -> str:
    print("model blocked", flush=True)
    await asyncio.Event().wait()  # until killed
    return "never"


async def main(db: str, mode: str) -> None:
    marker = Path(db).with_suffix(".marker")

    def summarise(request: object) -> str:
        with marker.open("a") as out:
            out.write("summarised\n")
        return "They talked about x."

    if mode == "billed":
        model: ScriptedModel = BilledModel([f"{LINE} a0", blocked], input_tokens=500)
    else:
        model = ScriptedModel([f"{LINE} a0", f"{LINE} a1", blocked])
    before = len(model.replies) - 1  # the turns before the one that compacts
    app = build(db, model, ScriptedModel([summarise]), mode, executor_id="child")
    async with app:
        session = await app.create_session("talker", key="crash")
        for i in range(before):
            receipt = await app.send(session.id, text=f"{LINE} q{i}")
            await app.wait(receipt.turn_id, timeout=30)
        receipt = await app.send(session.id, text=f"{LINE} q{before}")
        print(json.dumps([receipt.turn_id]), flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
