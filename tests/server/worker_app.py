"""An App for the worker test: ``ROLE=worker`` runs turns, anything else only sends."""

from __future__ import annotations

import os

from turnkit.sessions import App
from turnkit.testing import ScriptedModel

app = App(
    os.environ["WORKER_TEST_DB"],
    workers=os.environ.get("ROLE") == "worker",
    fire_schedules=False,
    executor_id=f"{os.environ.get('ROLE', 'client')}-{os.getpid()}",
)


@app.agent("echo", model=ScriptedModel([lambda r: f"worker says {r.last_text}"] * 20))
def echo() -> str:
    return f"Echo, from process {os.getpid()}."
