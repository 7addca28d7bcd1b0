"""The JSON shapes of the HTTP API (Pydantic), documented in ``/openapi.json``.

Fields are snake_case, as in Python. Request models refuse unknown fields,
so a misspelt field is a 422 naming it rather than silently ignored.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

__all__ = [
    "ApprovalIn",
    "ApprovalRequestOut",
    "CancelOut",
    "CreateSession",
    "EventOut",
    "ForkSession",
    "ForkedFromOut",
    "Health",
    "PostApprovals",
    "PostTurn",
    "Problem",
    "QuestionOut",
    "ReceiptOut",
    "ScheduleOut",
    "SessionOut",
    "TurnInput",
    "TurnOut",
    "WebhookAccepted",
]

Key = Field(default=None, min_length=1, max_length=500)


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateSession(_Request):
    """``POST /sessions``: a new session, or the existing one of ``key``."""

    agent: str = Field(min_length=1, max_length=200)
    key: str | None = Key
    data: dict[str, Any] | None = None


class ForkSession(_Request):
    """``POST /sessions/{id}/fork``: copy the first ``at`` messages (None: all)."""

    at: int | None = Field(default=None, ge=0)
    key: str | None = Key


class TurnInput(_Request):
    """What the turn is about: text, a JSON payload, or both."""

    text: str | None = None
    payload: Any = None


class PostTurn(_Request):
    """``POST /sessions/{id}/turns``."""

    input: TurnInput
    idempotency_key: str | None = Key
    answers: str | None = Field(default=None, min_length=1, max_length=64)
    on_busy: Literal["queue", "steer", "interrupt", "merge"] | None = None


class ApprovalIn(_Request):
    """A decision on one waiting tool call."""

    approved: StrictBool
    reason: str | None = Field(default=None, min_length=1, max_length=4000)
    input: dict[str, Any] | None = Field(
        default=None, description="run the approved call with this input (checked first)"
    )


class PostApprovals(_Request):
    """``POST /sessions/{id}/approvals``: true or false for every waiting call, or a
    decision per call id (every waiting call needs one)."""

    decisions: StrictBool | dict[str, StrictBool | ApprovalIn]
    reason: str | None = Field(default=None, min_length=1, max_length=4000)


class ApprovalRequestOut(BaseModel):
    """A tool call that waits for a person's decision."""

    call_id: str
    tool: str
    input: dict[str, Any]


class QuestionOptionOut(BaseModel):
    label: str
    value: Any = None


class QuestionOut(BaseModel):
    """A question the session's agent asked."""

    id: str
    text: str
    options: list[QuestionOptionOut] = []
    turn_id: str | None = None
    approvals: list[ApprovalRequestOut] = []


class ForkedFromOut(BaseModel):
    """The session a fork copied, and how many of its messages."""

    session_id: str
    at: int


class SessionOut(BaseModel):
    """A session (``status``: idle, running, awaiting_input, ended)."""

    id: str
    agent: str
    key: str | None
    status: Literal["idle", "running", "awaiting_input", "ended"]
    question: QuestionOut | None
    data: dict[str, Any]
    created_at: datetime
    parent_id: str | None = None
    forked_from: ForkedFromOut | None = None
    ended_at: datetime | None = None
    last_activity_at: datetime = Field(
        description="when its latest event was appended; created_at while it has none"
    )


class ReceiptOut(BaseModel):
    """An accepted input: its id and its turn's (None while held)."""

    input_id: str
    turn_id: str | None
    status: Literal["queued", "held", "steered", "merged"]
    duplicate: bool


class TurnOut(BaseModel):
    """One run of the agent on one input."""

    id: str
    session_id: str
    seq: int
    status: Literal["queued", "running", "completed", "failed", "cancelled"]
    input: dict[str, Any]
    output: str | None
    question: QuestionOut | None
    error: str | None
    reason: str | None
    started_at: datetime | None
    ended_at: datetime | None


def _event_shapes(schema: dict[str, Any]) -> None:
    """Document each event type's ``data`` (from its one definition in sessions.model.events)."""
    from pydantic import TypeAdapter

    from turnkit.sessions.model.events import EVENT_TYPES

    shapes = []
    for name, cls in EVENT_TYPES.items():
        shape = TypeAdapter(cls).json_schema()
        shape["title"] = f"{cls.__name__} ({name})"
        shape.pop("description", None)
        shape["description"] = f"data of a {name!r} event: " + (cls.__doc__ or "").strip()
        shapes.append(shape)
    properties = schema["properties"]
    properties["type"] = {"type": "string", "enum": list(EVENT_TYPES), "title": "Type"}
    properties["data"] = {
        "title": "Data",
        "description": "the payload; its shape is the one listed for the event's type",
        "anyOf": shapes,
    }


class EventOut(BaseModel):
    """One entry of a session's event log (``seq`` from 1, no gaps)."""

    model_config = ConfigDict(json_schema_extra=_event_shapes)

    id: int
    seq: int
    session_id: str
    turn_id: str | None
    type: str
    timestamp: datetime
    data: Any


class CancelOut(BaseModel):
    """The turn asked to stop, or None when none was running."""

    turn_id: str | None


class WebhookAccepted(BaseModel):
    """A webhook delivery, stored (202) or recognised as a replay (200)."""

    webhook_id: str
    message_id: str
    session_id: str
    input_id: str
    turn_id: str | None
    duplicate: bool


class ScheduleOut(BaseModel):
    """A schedule and the next instant it fires."""

    id: str
    cron: str
    timezone: str
    agent: str
    overlap: Literal["skip", "allow"]
    next_fire_at: datetime
    last_fired_for: datetime | None


class Health(BaseModel):
    status: Literal["ok"]
    executor_id: str  # the process answering: see GET /executors
    runs_turns: bool


class Problem(BaseModel):
    """An error, as RFC 9457 ``application/problem+json``."""

    type: str = "about:blank"
    title: str
    status: int
    detail: str
    errors: list[dict[str, Any]] | None = None
