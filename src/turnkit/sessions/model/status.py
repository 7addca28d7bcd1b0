"""The statuses of turns and sessions, with their two questions asked once.

A turn is ``queued`` until a worker claims it, ``running`` while the agent
works, then ``completed``, ``failed`` or ``cancelled`` for good. Which of
these are active or terminal is said here and nowhere else; the transitions
between them are :mod:`turnkit.sessions.db.turns`.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ACTIVE", "TERMINAL", "SessionState", "TurnState"]


class TurnState(StrEnum):
    """A turn's status (compares equal to its string: ``TurnState.QUEUED == "queued"``)."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    def is_active(self) -> bool:
        """Queued or running: the turn has work left."""
        return self in ACTIVE

    def is_terminal(self) -> bool:
        """Completed, failed or cancelled: nothing about the turn changes again."""
        return self in TERMINAL


class SessionState(StrEnum):
    """A session's status, derived from its row and its turns."""

    IDLE = "idle"
    RUNNING = "running"
    AWAITING_INPUT = "awaiting_input"
    ENDED = "ended"


ACTIVE: frozenset[TurnState] = frozenset({TurnState.QUEUED, TurnState.RUNNING})
TERMINAL: frozenset[TurnState] = frozenset(
    {TurnState.COMPLETED, TurnState.FAILED, TurnState.CANCELLED}
)
