"""What the App gives back: :class:`Session`, :class:`Turn`, :class:`Receipt`, :class:`Event`.

Each is a frozen snapshot read from the store; read again for fresh state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from turnkit.agent.approvals import ApprovalRequest
from turnkit.sessions.model.inputs import AgentInput
from turnkit.sessions.model.status import TERMINAL

__all__ = [
    "Event",
    "EventType",
    "ForkedFrom",
    "Question",
    "QuestionOption",
    "Receipt",
    "ReceiptStatus",
    "Session",
    "SessionStatus",
    "Turn",
    "TurnStatus",
]

SessionStatus = Literal["idle", "running", "awaiting_input", "ended"]
TurnStatus = Literal["queued", "running", "completed", "failed", "cancelled"]
ReceiptStatus = Literal["queued", "held", "steered", "merged"]
EventType = Literal[
    "input.received",
    "turn.started",
    "message",
    "tool.started",
    "tool.finished",
    "question.asked",
    "turn.completed",
    "turn.failed",
    "turn.cancelled",
    "schedule.skipped",
    "channel.delivery_failed",
    "approval.decided",
    "history.compacted",
    "input.steered",
]


@dataclass(frozen=True, slots=True)
class QuestionOption:
    """One choice offered with a question."""

    label: str
    value: Any


@dataclass(frozen=True, slots=True)
class Question:
    """A question the session's agent asked; it waits for an answer.

    ``approvals`` lists the tool calls that wait for a person's decision
    (a tool made with ``needs_approval``); it is empty for an ``ask``.
    """

    id: str
    text: str
    options: tuple[QuestionOption, ...] = ()
    turn_id: str | None = None
    approvals: tuple[ApprovalRequest, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        options = [{"label": o.label, "value": o.value} for o in self.options]
        return {
            "id": self.id,
            "text": self.text,
            "options": options,
            "turn_id": self.turn_id,
            "approvals": [request.to_dict() for request in self.approvals],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Question:
        options = tuple(QuestionOption(o["label"], o["value"]) for o in data.get("options", ()))
        approvals = tuple(
            ApprovalRequest(a["call_id"], a["tool"], a["input"]) for a in data.get("approvals", ())
        )
        return cls(data["id"], data["text"], options, data.get("turn_id"), approvals)


@dataclass(frozen=True, slots=True)
class ForkedFrom:
    """Where a fork began: its source session and how many of its messages it copied."""

    session_id: str
    at: int


@dataclass(frozen=True, slots=True)
class Session:
    """A durable conversation with one agent.

    ``status`` is ``idle`` (nothing to do), ``running`` (a turn is queued or
    running), ``awaiting_input`` (a question is open) or ``ended``. ``data``
    is the JSON the renders keep with ``use_session_data()``. ``parent_id``
    links a sub-agent's session to the session that started it;
    ``forked_from`` says which session a fork copied and where
    (``app.fork_session``). ``last_activity_at`` is the time of its latest
    event, ``created_at`` while it has none (aware UTC, as every time here).
    """

    id: str
    agent: str
    key: str | None
    status: SessionStatus
    question: Question | None
    data: dict[str, Any]
    created_at: datetime
    parent_id: str | None = None
    forked_from: ForkedFrom | None = None
    ended_at: datetime | None = None
    # Keyword-only, so the positions above mean what they always did.
    last_activity_at: datetime = field(kw_only=True)


@dataclass(frozen=True, slots=True)
class Turn:
    """One run of the agent on one input.

    ``output`` is the final text of a completed turn; ``question`` is set when
    it ended by asking; ``error`` and ``reason`` say why a turn failed or was
    cancelled (``reason`` is a short code: ``model_error``, ``render_error``,
    ``max_turns``, ``cancelled``, ...).
    """

    id: str
    session_id: str
    seq: int
    status: TurnStatus
    input: AgentInput
    output: str | None = None
    question: Question | None = None
    error: str | None = None
    reason: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    output_data: Any = None  # with output_type: the validated answer, as JSON

    @property
    def done(self) -> bool:
        """Whether the turn is terminal (completed, failed or cancelled)."""
        return self.status in TERMINAL


@dataclass(frozen=True, slots=True)
class Receipt:
    """What ``send`` accepted: the input's id, and its turn's (None while held).

    ``status``: ``queued`` (its own turn), ``held`` (a question is open),
    ``steered`` (it joins the running turn, ``turn_id``) or ``merged`` (it
    joins the queued turn ``turn_id``); see SPEC section 7, "Input while busy".
    """

    input_id: str
    turn_id: str | None
    status: ReceiptStatus
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class Event:
    """One entry of a session's append-only event log (``seq`` from 1, no gaps).

    ``data`` is plain JSON (dicts and lists), decoded from the log for each
    read, so changing it changes nothing stored or seen by anyone else.
    """

    id: int
    seq: int
    session_id: str
    turn_id: str | None
    type: EventType
    timestamp: datetime
    data: Any

    def to_dict(self) -> dict[str, Any]:
        """The event as plain JSON (what the server sends)."""
        import copy

        return {
            "id": self.id,
            "seq": self.seq,
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "type": self.type,
            "timestamp": self.timestamp.isoformat(),
            "data": copy.deepcopy(self.data),
        }
