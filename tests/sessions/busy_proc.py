"""Sends one input from a process of its own that runs no turns, for the busy tests.

    python busy_proc.py DB_URL SESSION_ID TEXT ON_BUSY

Prints the receipt as JSON, then exits.
"""

from __future__ import annotations

import asyncio
import json
import sys

from turnkit.sessions import App


async def main(url: str, session_id: str, text: str, on_busy: str) -> None:
    app = App(url, workers=False, fire_schedules=False, executor_id="sender")
    async with app:
        receipt = await app.send(session_id, text=text, on_busy=on_busy)
    print(json.dumps({"status": receipt.status, "turn_id": receipt.turn_id}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
