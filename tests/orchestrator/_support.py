"""Helpers shared by the orchestrator tests."""

from __future__ import annotations

import re
from typing import Any

from turnkit import ProgressEvent
from turnkit.testing import ScriptedRequest


class Progress:
    """An on_progress callback that records every event it gets."""

    def __init__(self) -> None:
        self.events: list[ProgressEvent] = []

    def __call__(self, event: ProgressEvent) -> None:
        self.events.append(event)

    def types(self) -> list[str]:
        return [event.type for event in self.events]

    def of(self, kind: str) -> list[ProgressEvent]:
        return [event for event in self.events if event.type == kind]

    def order(self) -> list[tuple[str, str | None]]:
        """(type, task) of the task events, in order."""
        return [(e.type, e.task) for e in self.events if e.type.startswith("task_")]


def task_title(request: ScriptedRequest) -> str:
    """The title of the task a request is about ("" when none)."""
    found = re.search(r"Your task: (.+)", request.last_text)
    return found.group(1) if found else ""


def echo_task(request: ScriptedRequest) -> str:
    """A scripted reply: the output of a task is ``out-<title>``."""
    return f"out-{task_title(request)}"


def every(reply: Any, times: int = 20) -> list[Any]:
    return [reply] * times
