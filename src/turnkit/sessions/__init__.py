"""Durable agent sessions: an App of agents defined as render functions (SPEC section 7).

``App`` and the records load DBOS and SQLAlchemy, so this package imports
them on first use; the render hooks are light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from turnkit.errors import (
    InvalidInputError,
    SessionEndedError,
    SessionNotFoundError,
    TurnNotFoundError,
    UnknownAgentError,
)
from turnkit.sessions.hooks import use_current_input, use_input, use_session_data, use_tool
from turnkit.sessions.inputs import (
    AgentInput,
    Answer,
    Channel,
    EventInfo,
    EventResult,
    HeldInput,
    ScheduleInfo,
    WebhookInfo,
)
from turnkit.sessions.records import Event, Question, QuestionOption, Receipt, Session, Turn
from turnkit.sessions.subagents import subagent

if TYPE_CHECKING:
    from turnkit.sessions.app import App

__all__ = [
    "AgentInput",
    "Answer",
    "App",
    "Channel",
    "Event",
    "EventInfo",
    "EventResult",
    "HeldInput",
    "InvalidInputError",
    "Question",
    "QuestionOption",
    "Receipt",
    "ScheduleInfo",
    "Session",
    "SessionEndedError",
    "SessionNotFoundError",
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
    if name == "App":
        from turnkit.sessions.app import App

        return App
    raise AttributeError(f"module 'turnkit.sessions' has no attribute {name!r}")
