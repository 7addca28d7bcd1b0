"""The App of the stalled-worker test (``turnkit worker``, in several processes).

Agent ``stall``: its model calls tool ``hold`` twice (calls ``h1`` then
``h2``), then answers ``done:<h2's result>``. ``hold`` appends
``start<TAB>executor<TAB>call`` to ``STALL_MARKER`` and waits until the file
``<STALL_DIR>/release-<executor>-<call>`` exists (the test controls it), then
answers ``ran:<executor>``. Each model call appends ``model<TAB>executor<TAB>n``.
``SCALE_DB`` is the database, ``SCALE_LEASE`` the lease seconds.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from turnkit import tool
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

MARKER = Path(os.environ["STALL_MARKER"])
RELEASES = Path(os.environ["STALL_DIR"])

app = App(
    os.environ["SCALE_DB"],
    fire_schedules=False,
    lease_seconds=float(os.environ.get("SCALE_LEASE", "1.5")),
)


def _mark(*fields: str) -> None:
    with MARKER.open("a") as out:  # one short line per write: appends do not interleave
        out.write("\t".join(fields) + "\n")


@tool
async def hold(call: str) -> str:
    """Wait until the test lets this call go on."""
    _mark("start", app.executor_id, call)
    release = RELEASES / f"release-{app.executor_id}-{call}"
    while not release.exists():
        await asyncio.sleep(0.02)
    return f"ran:{app.executor_id}"


def _reply(request: object) -> object:
    messages = request.messages  # type: ignore[attr-defined]
    _mark("model", app.executor_id, str(len(messages)))
    last = messages[-1]
    results = [block for block in last.content if block.type == "tool_result"]
    if not results:
        return {"role": "assistant", "content": [_call("h1")]}
    if results[0].tool_use_id == "h1":
        return {"role": "assistant", "content": [_call("h2")]}
    content = results[0].content
    return f"done:{content if isinstance(content, str) else content[0].text}"


def _call(call: str) -> dict[str, object]:
    return {"type": "tool_use", "id": call, "name": "hold", "input": {"call": call}}


@app.agent("stall", model=ScriptedModel([_reply] * 1000), tools=[hold])
def stall_agent() -> str:
    return "Hold twice, then say what the second hold said."
