"""One of two processes firing the same schedule: run by test_schedules.py.

Usage: python schedule_proc.py DB_URL. Prints ``ready`` once started, waits
for ``go`` on stdin, calls ``run_schedules`` for 30 consecutive minutes and
prints the instants this process fired, as a JSON list.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import UTC, datetime, timedelta

from turnkit.sessions import App
from turnkit.testing import ScriptedModel


async def main(db_url: str) -> None:
    app = App(db_url, workers=False, fire_schedules=False, executor_id=f"proc-{os.getpid()}")
    app.agent("digest", model=ScriptedModel(["x"]))(lambda: "digest")
    app.schedule("every", "* * * * *", "digest", dispatch={"text": "tick"}, overlap="allow")
    async with app:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        start = datetime(2026, 5, 4, 9, 0, tzinfo=UTC)
        fired = []
        for minute in range(30):
            for fire in await app.run_schedules(start + timedelta(minutes=minute, seconds=1)):
                fired.append(fire.scheduled_for.isoformat())
        print(json.dumps(fired), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
