"""What a turn is about: :class:`AgentInput` and the typed parts it carries.

Everything here is frozen. An input is stored as sent and an ``AgentInput``
is built from the stored row once per turn, so a render, a tool and a crash
recovery all see the same object. ``to_dict``/``from_dict`` give the JSON
shape used in the store and in events (datetimes as ISO 8601 strings).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Literal

from turnkit.messages import thaw
from turnkit.messages.checks import freeze_json

__all__ = [
    "ON_BUSY",
    "SOURCES",
    "AgentInput",
    "Answer",
    "Channel",
    "EventInfo",
    "EventResult",
    "HeldInput",
    "InputSource",
    "OnBusy",
    "ScheduleInfo",
    "WebhookInfo",
]

InputSource = Literal["user", "channel", "schedule", "webhook", "subagent", "system", "event"]
SOURCES: tuple[str, ...] = ("user", "channel", "schedule", "webhook", "subagent", "system", "event")
OnBusy = Literal["queue", "steer", "interrupt", "merge"]
ON_BUSY: tuple[str, ...] = ("queue", "steer", "interrupt", "merge")
"""What an input that arrives while a turn of its session runs does (SPEC 7, "Input while busy")."""


class _Record:
    """JSON round trip for the frozen records of this module."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """A plain JSON dict (datetimes as ISO strings, payloads thawed)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}  # type: ignore[arg-type]


def _plain(value: Any) -> Any:
    if isinstance(value, _Record):
        return value.to_dict()
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, tuple) and value and isinstance(value[0], _Record):
        return [_plain(item) for item in value]
    return thaw(value)


def _time(value: Any) -> datetime | None:
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value)


@dataclass(frozen=True, slots=True)
class Channel(_Record):
    """Where a channel input came from, and where replies go."""

    provider: Literal["slack", "linear"]
    connection_id: str | None = None
    workspace_id: str | None = None
    conversation_id: str | None = None
    user_id: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Channel:
        return cls(**data)


@dataclass(frozen=True, slots=True)
class Answer(_Record):
    """The answer to the question a session asked (``ask``)."""

    question_id: str
    text: str | None
    value: Any = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Answer:
        return cls(data["question_id"], data.get("text"), freeze_json(data.get("value")))


@dataclass(frozen=True, slots=True)
class HeldInput(_Record):
    """Another input delivered with a turn's own: one held while a question was open
    (``AgentInput.steering``) or one merged into a queued turn (``AgentInput.merged``)."""

    text: str | None
    payload: Any
    channel: Channel | None
    received_at: datetime
    provider_time: datetime | None
    source: InputSource
    event: EventInfo | None = None  # a held ``event`` input: the outcome it carries

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HeldInput:
        channel, event = data.get("channel"), data.get("event")
        return cls(
            data.get("text"),
            freeze_json(data.get("payload")),
            None if channel is None else Channel.from_dict(channel),
            _time(data["received_at"]),  # type: ignore[arg-type]
            _time(data.get("provider_time")),
            data["source"],
            None if event is None else EventInfo.from_dict(event),
        )


@dataclass(frozen=True, slots=True)
class EventResult(_Record):
    """A watched turn's final text, cut to at most 16 KB of UTF-8."""

    text: str
    truncated: bool = False


@dataclass(frozen=True, slots=True)
class EventInfo(_Record):
    """The outcome of another session's turn, delivered as an ``event`` input."""

    id: int
    type: Literal["turn.completed", "turn.failed", "turn.cancelled"]
    session_id: str
    turn_id: str
    agent_id: str
    occurred_at: datetime
    reason: str | None = None
    error: str | None = None
    result: EventResult | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EventInfo:
        values = dict(data)
        values["occurred_at"] = _time(values["occurred_at"])
        if values.get("result") is not None:
            values["result"] = EventResult(**values["result"])
        return cls(**values)


@dataclass(frozen=True, slots=True)
class ScheduleInfo(_Record):
    """Which schedule fired, and for which instant."""

    id: str
    scheduled_for: datetime

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ScheduleInfo:
        return cls(data["id"], _time(data["scheduled_for"]))  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True)
class WebhookInfo(_Record):
    """Which webhook delivered the payload (``message_id`` is its ``webhook-id``)."""

    id: str
    message_id: str

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WebhookInfo:
        return cls(data["id"], data["message_id"])


@dataclass(frozen=True, slots=True)
class AgentInput(_Record):
    """The input a turn runs on, as a render sees it through ``use_input()``.

    ``text`` and ``payload`` are what the sender gave (an ``event`` input has
    no text); ``answer`` and ``steering`` are set when the input answers a
    question the session asked; ``channel``, ``event``, ``schedule`` and
    ``webhook`` say more about where it came from. ``payload`` is deeply
    frozen JSON. ``hops`` counts the turn outcomes and sub-agent tasks that
    led to this input (0 for one from outside: a person, a channel, a
    webhook, a schedule); the App refuses inputs past its ``max_hops``.
    ``merged`` holds the inputs that joined this turn while it was queued
    (``on_busy="merge"``), in arrival order, after this one.
    """

    source: InputSource
    text: str | None = None
    payload: Any = None
    answer: Answer | None = None
    steering: tuple[HeldInput, ...] = ()
    channel: Channel | None = None
    event: EventInfo | None = None
    schedule: ScheduleInfo | None = None
    webhook: WebhookInfo | None = None
    received_at: datetime | None = None
    provider_time: datetime | None = None
    id: str | None = None
    hops: int = 0
    merged: tuple[HeldInput, ...] = ()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentInput:
        """The input again, from :meth:`to_dict`'s shape."""
        parts: dict[str, Any] = {
            "answer": Answer,
            "channel": Channel,
            "event": EventInfo,
            "schedule": ScheduleInfo,
            "webhook": WebhookInfo,
        }
        values: dict[str, Any] = {}
        for name, value in data.items():
            if value is not None and name in parts:
                value = parts[name].from_dict(value)
            values[name] = value
        values["payload"] = freeze_json(data.get("payload"))
        values["steering"] = tuple(HeldInput.from_dict(h) for h in data.get("steering") or ())
        values["merged"] = tuple(HeldInput.from_dict(h) for h in data.get("merged") or ())
        values["received_at"] = _time(data.get("received_at"))
        values["provider_time"] = _time(data.get("provider_time"))
        return cls(**values)
