"""An App for the live-output process tests: ``ROLE=worker`` runs turns, else it only follows.

Its model streams slowly (3 characters every 10 ms), so a follower in
another process sees the reply arrive in pieces.
"""

from __future__ import annotations

import os

from turnkit.sessions import App
from turnkit.testing import StreamingScriptedModel

ANSWER = "Streaming from the worker process, three characters at a time."

app = App(
    os.environ["LIVE_TEST_DB"],
    workers=os.environ.get("ROLE") == "worker",
    fire_schedules=False,
    executor_id=f"{os.environ.get('ROLE', 'client')}-{os.getpid()}",
)

model = StreamingScriptedModel([ANSWER] * 20, chunk=3, delay=0.01)


@app.agent("writer", model=model)
def writer() -> str:
    return "Write."
