"""The App the scale-out tests run in several processes (``turnkit worker`` / ``serve``).

Configured by the environment: ``SCALE_DB`` (the database URL), ``SCALE_MARKER``
(a file each model call appends ``executor<TAB>input text<TAB>start<TAB>end`` to),
``SCALE_DELAY`` (seconds a model call takes, default 0.02), ``SCALE_LEASE``
(lease seconds, default 2). ``TURNKIT_EXECUTOR_ID`` names the process, when set.
"""

from __future__ import annotations

import asyncio
import os
import time

from turnkit.sessions import App
from turnkit.testing import ScriptedModel

MARKER = os.environ.get("SCALE_MARKER")
DELAY = float(os.environ.get("SCALE_DELAY", "0.02"))

app = App(
    os.environ["SCALE_DB"],
    fire_schedules=False,
    lease_seconds=float(os.environ.get("SCALE_LEASE", "2")),
    max_running=int(os.environ.get("SCALE_MAX_RUNNING", "8")),
)


async def echo(request: object) -> str:
    started = time.time()
    await asyncio.sleep(DELAY)
    text = request.last_text  # type: ignore[attr-defined]
    if MARKER:
        with open(MARKER, "a") as out:  # one short line per write: appends do not interleave
            out.write(f"{app.executor_id}\t{text}\t{started}\t{time.time()}\n")
    return f"echo:{text}"


@app.agent("echo", model=ScriptedModel([echo] * 100_000))
def echo_agent() -> str:
    return "Echo."
