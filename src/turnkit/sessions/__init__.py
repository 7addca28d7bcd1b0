"""Durable agent sessions: an App of agents defined as render functions (SPEC section 7).

The package, by folder (each module's docstring says more)::

    model/     frozen data: inputs, records, statuses, the event types     (light)
    render/    what a render sees and what the model is shown: hooks, ask  (light)
    db/        the only SQL: schema, engines, the store, turn transitions,
               inputs and their routing, steps, subscriptions, schedules
    runtime/   DBOS launch and dispatch, the turn worker, the durable
               model, wake-ups; Runtime is what a started App holds
    sources/   where inputs come from: webhooks, schedules, subscriptions,
               sub-agents
    app.py     the App façade; definitions.py its agents and tools

``App`` loads DBOS and SQLAlchemy, so this package imports it on first
use; the hooks, records and ``subagent`` are light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from turnkit.errors import (
    HopLimitError,
    InvalidInputError,
    SessionEndedError,
    SessionNotFoundError,
    SlowFollowerError,
    TurnNotFoundError,
    UnknownAgentError,
)
from turnkit.sessions.model.inputs import (
    AgentInput,
    Answer,
    Channel,
    EventInfo,
    EventResult,
    HeldInput,
    ScheduleInfo,
    WebhookInfo,
)
from turnkit.sessions.model.live import LiveEvent
from turnkit.sessions.model.records import (
    Event,
    ForkedFrom,
    Question,
    QuestionOption,
    Receipt,
    Session,
    Turn,
)
from turnkit.sessions.render.hooks import use_current_input, use_input, use_session_data, use_tool
from turnkit.sessions.sources.subagents import subagent

if TYPE_CHECKING:
    from turnkit.app import App

__all__ = [
    "AgentInput",
    "Answer",
    "App",
    "Channel",
    "Event",
    "EventInfo",
    "EventResult",
    "ForkedFrom",
    "HeldInput",
    "HopLimitError",
    "InvalidInputError",
    "LiveEvent",
    "Question",
    "QuestionOption",
    "Receipt",
    "ScheduleInfo",
    "Session",
    "SessionEndedError",
    "SessionNotFoundError",
    "SlowFollowerError",
    "Turn",
    "TurnNotFoundError",
    "UnknownAgentError",
    "WebhookInfo",
    "subagent",
    "use_current_input",
    "use_input",
    "use_session_data",
    "use_tool",
]


def __getattr__(name: str) -> Any:
    if name == "App":  # with the channels' methods: see turnkit.app
        from turnkit.app import App

        return App
    raise AttributeError(f"module 'turnkit.sessions' has no attribute {name!r}")
