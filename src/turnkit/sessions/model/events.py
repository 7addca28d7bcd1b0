"""The session event vocabulary: one frozen type per event, with its payload.

Every event in a session's log is one of these, and :meth:`Tx.emit
<turnkit.sessions.db.store.Tx.emit>` takes nothing else, so the log's shape
is said once, here. An event's fields are its ``data`` as stored (plain
JSON); :data:`EVENT_TYPES` maps each ``type`` string to its class, which is
also what the server's OpenAPI document describes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

__all__ = [
    "EVENT_TYPES",
    "TURN_END_TYPES",
    "ApprovalDecided",
    "ChannelDeliveryFailed",
    "HistoryCompacted",
    "InputReceived",
    "InputRefused",
    "InputSteered",
    "MessageAdded",
    "QuestionAsked",
    "ScheduleFailed",
    "ScheduleSkipped",
    "SessionEvent",
    "ToolFinished",
    "ToolStarted",
    "TurnCancelled",
    "TurnCompleted",
    "TurnFailed",
    "TurnStarted",
]


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """The base of every event type: ``type`` names it, the fields are its data."""

    type: ClassVar[str] = ""

    def data(self) -> dict[str, Any]:
        """The payload as stored in the log (plain JSON)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class InputReceived(SessionEvent):
    """An input was accepted; ``held`` when it waits for a question's answer."""

    type: ClassVar[str] = "input.received"
    input_id: str
    source: str
    text: str | None
    held: bool


@dataclass(frozen=True, slots=True)
class InputSteered(SessionEvent):
    """An input sent with ``on_busy="steer"`` joined the running turn ``turn_id``:
    the model reads it at this model call (the ``message`` event that follows)."""

    type: ClassVar[str] = "input.steered"
    input_id: str
    turn_id: str


@dataclass(frozen=True, slots=True)
class TurnStarted(SessionEvent):
    """A worker claimed the turn; ``input`` is its ``AgentInput`` as JSON."""

    type: ClassVar[str] = "turn.started"
    input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class MessageAdded(SessionEvent):
    """A message joined the durable conversation (its wire dict)."""

    type: ClassVar[str] = "message"
    message: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolStarted(SessionEvent):
    """A tool call is about to run (recorded first, so a crash cannot run it unseen)."""

    type: ClassVar[str] = "tool.started"
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolFinished(SessionEvent):
    """A tool call has its result."""

    type: ClassVar[str] = "tool.finished"
    id: str
    name: str
    is_error: bool


@dataclass(frozen=True, slots=True)
class QuestionAsked(SessionEvent):
    """The agent asked; the session waits. ``approvals`` lists calls awaiting a yes."""

    type: ClassVar[str] = "question.asked"
    question_id: str
    question: str
    options: list[dict[str, Any]]
    approvals: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ApprovalDecided(SessionEvent):
    """A tool call that waited for a person was approved or denied.

    ``source`` is the deciding input's source and ``user_id`` its author on a
    channel (``channel.user_id``; None otherwise). ``input`` is the edited
    input an approval runs the call with, or None (the model's input).
    Recorded with the input that decides, before the call runs.
    """

    type: ClassVar[str] = "approval.decided"
    call_id: str
    tool: str
    approved: bool
    reason: str | None
    source: str
    user_id: str | None
    input: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class TurnCompleted(SessionEvent):
    """The turn ended well: ``result`` {``text``, ``truncated``} (16 KB at most)."""

    type: ClassVar[str] = "turn.completed"
    result: dict[str, Any]
    output_data: Any = None  # structured output, when the agent has an output_type

    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"result": self.result}
        if self.output_data is not None:
            data["output_data"] = self.output_data
        return data


@dataclass(frozen=True, slots=True)
class TurnFailed(SessionEvent):
    """The turn ended in failure: a short ``reason`` code and the ``error`` text."""

    type: ClassVar[str] = "turn.failed"
    reason: str | None
    error: str | None


@dataclass(frozen=True, slots=True)
class TurnCancelled(SessionEvent):
    """The turn was stopped: ``reason`` says by what (``cancelled``, ``session_ended``...)."""

    type: ClassVar[str] = "turn.cancelled"
    reason: str | None


@dataclass(frozen=True, slots=True)
class ScheduleSkipped(SessionEvent):
    """A schedule's instant came while its previous turn was still active."""

    type: ClassVar[str] = "schedule.skipped"
    schedule_id: str
    scheduled_for: str


@dataclass(frozen=True, slots=True)
class ScheduleFailed(SessionEvent):
    """A schedule's instant could not fire: ``error`` says why (its ``session_key``
    raised, say). Recorded in the schedule's own session, ``schedule:<id>``."""

    type: ClassVar[str] = "schedule.failed"
    schedule_id: str
    scheduled_for: str
    error: str


@dataclass(frozen=True, slots=True)
class ChannelDeliveryFailed(SessionEvent):
    """A reply could not be posted to the session's channel, for good."""

    type: ClassVar[str] = "channel.delivery_failed"
    provider: str
    kind: str  # "outcome" (a turn's reply) | "notice" (a post of the channel's own)
    error: str
    attempts: int
    posts_made: int  # posts of the reply made before giving up


@dataclass(frozen=True, slots=True)
class InputRefused(SessionEvent):
    """Inputs this session would have sent were not created: the chain of turn
    outcomes and sub-agent tasks they belong to reached the App's ``max_hops``.

    ``source`` is ``"event"`` (this turn's outcome, for its subscribers) or
    ``"subagent"`` (a task for a child session); ``hops`` is what the input
    would have counted, ``to_sessions`` where it would have gone.
    """

    type: ClassVar[str] = "input.refused"
    source: str
    to_sessions: list[str]
    hops: int
    limit: int
    to_agent: str | None = None  # a sub-agent task's agent (its session was not made)
    reason: str = "max_hops"


@dataclass(frozen=True, slots=True)
class HistoryCompacted(SessionEvent):
    """The older part of the conversation was summarised into one ``compaction``
    message (the ``message`` event just before this one): ``replaced`` is how many
    messages it stands for, ``tokens_before`` / ``tokens_after`` the estimates of
    what the model sees without and with it."""

    type: ClassVar[str] = "history.compacted"
    replaced: int
    tokens_before: int
    tokens_after: int


EVENT_TYPES: dict[str, type[SessionEvent]] = {
    cls.type: cls
    for cls in (
        InputReceived,
        InputSteered,
        TurnStarted,
        MessageAdded,
        ToolStarted,
        ToolFinished,
        QuestionAsked,
        ApprovalDecided,
        TurnCompleted,
        TurnFailed,
        TurnCancelled,
        ScheduleSkipped,
        ScheduleFailed,
        ChannelDeliveryFailed,
        InputRefused,
        HistoryCompacted,
    )
}
TURN_END_TYPES: frozenset[str] = frozenset(
    {TurnCompleted.type, TurnFailed.type, TurnCancelled.type}
)
