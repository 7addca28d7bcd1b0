"""What an orchestrator reports: progress events and trace records.

Callbacks get their own copy of every event's data, so whatever a callback
does to it changes neither the run nor what any later event carries. A
callback may be sync or async; one that raises is logged and never breaks
the run.
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from turnkit._sync import maybe_await

__all__ = [
    "ProgressCallback",
    "ProgressEvent",
    "ProgressEventType",
    "TraceCallback",
    "TraceEvent",
    "emit",
]

ProgressEventType = Literal[
    "agent_start",
    "agent_complete",
    "task_start",
    "task_complete",
    "task_skipped",
    "task_retry",
    "budget_exceeded",
    "error",
]


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    """One step of an orchestrated run, as told to ``on_progress``.

    - ``type``: see :data:`ProgressEventType`.
    - ``agent``: the name of the agent concerned, if any.
    - ``task``: the title of the task concerned, if any.
    - ``data``: plain JSON-like data, the callback's own copy:

      - ``agent_start``: ``{"prompt": str}`` for a string input,
        ``{"messages": [dict, ...]}`` (wire dicts) for structured input;
      - ``agent_complete``: ``success``, ``output``, ``usage``
        (``input_tokens``, ``output_tokens``), ``stop_reason``, ``error``,
        ``cost_usd``;
      - ``task_start``: ``depends_on`` (emitted once, before the first attempt);
      - ``task_complete``: ``status`` (completed or failed), ``output``,
        ``usage``, ``attempts``, ``error``;
      - ``task_skipped``: ``reason``, ``cause`` (the task that failed, or None);
      - ``task_retry``: ``attempt`` (the one that failed), ``error``, ``delay_s``;
      - ``budget_exceeded``: ``kind`` (tokens or cost), ``spent``, ``limit``,
        ``model``;
      - ``error``: ``error`` (text), ``type`` (the exception's class name);
        once for a run that raised or was refused by the budget, or for a
        task that failed for good.
    """

    type: ProgressEventType
    agent: str | None = None
    task: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """A finished span, as told to ``on_trace``.

    ``start_time``/``end_time`` are Unix times in seconds; ``attributes``
    follow the OpenTelemetry gen_ai conventions (``gen_ai.operation.name``,
    ``gen_ai.request.model``, ``gen_ai.usage.input_tokens``, ...) plus
    ``turnkit.*`` sizes and counts. ``status`` is ``ok`` or ``error``.
    """

    name: str
    span_id: str
    parent_id: str | None
    trace_id: str
    start_time: float
    end_time: float
    attributes: Mapping[str, Any]
    status: Literal["ok", "error"] = "ok"
    error: str | None = None

    @property
    def duration_s(self) -> float:
        return self.end_time - self.start_time


ProgressCallback: TypeAlias = Callable[[ProgressEvent], "Awaitable[Any] | Any"]
TraceCallback: TypeAlias = Callable[[TraceEvent], "Awaitable[Any] | Any"]


async def emit(callback: Callable[[Any], Any] | None, event: ProgressEvent | TraceEvent) -> None:
    """Give ``callback`` its own copy of ``event``; log (never raise) its errors."""
    if callback is None:
        return
    if isinstance(event, ProgressEvent):
        event = ProgressEvent(event.type, event.agent, event.task, copy.deepcopy(event.data))
    else:
        attributes = copy.deepcopy(dict(event.attributes))
        event = TraceEvent(
            event.name,
            event.span_id,
            event.parent_id,
            event.trace_id,
            event.start_time,
            event.end_time,
            attributes,
            event.status,
            event.error,
        )
    try:
        await maybe_await(callback(event))
    except Exception:
        import logging  # here, not at the top: keeps `import turnkit` fast

        logging.getLogger("turnkit.orchestrator").exception(
            "%s callback failed on %r; the run goes on", _kind(event), _name(event)
        )


def _kind(event: ProgressEvent | TraceEvent) -> str:
    return "on_progress" if isinstance(event, ProgressEvent) else "on_trace"


def _name(event: ProgressEvent | TraceEvent) -> str:
    return event.type if isinstance(event, ProgressEvent) else event.name
