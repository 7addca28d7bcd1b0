"""Live output: :class:`LiveEvent`, a piece of a model reply while it streams.

Live events are not part of a session's event log: they are never stored
with a ``seq``, never returned by ``events()``, and the durable ``message``
event that follows them carries the whole reply. ``after_seq`` places one
among the durable events (it comes after the event with that seq); ``index``
counts from 0 within one model call, one counter for all three types. An
``index`` of 0 again for the same ``after_seq`` means the model call started
over (the process running it stopped before its reply was recorded): drop
what was shown of the earlier attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["LIVE_TYPES", "LiveEvent", "LiveType"]

LiveType = Literal["text.delta", "thinking.delta", "tool_input.delta"]
LIVE_TYPES: tuple[str, ...] = ("text.delta", "thinking.delta", "tool_input.delta")


@dataclass(frozen=True, slots=True)
class LiveEvent:
    """A delta of the model call a turn is making now.

    ``data`` is ``{"text": ...}``; for ``tool_input.delta``
    ``{"call_id", "name", "text"}`` (pieces of the call's JSON input).

    >>> LiveEvent("s1", "t1", 4, "text.delta", 0, {"text": "Hel"}).data["text"]
    'Hel'
    """

    session_id: str
    turn_id: str
    after_seq: int
    type: LiveType
    index: int
    data: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """The event as plain JSON (what the server sends)."""
        return {
            "session_id": self.session_id,
            "turn_id": self.turn_id,
            "after_seq": self.after_seq,
            "type": self.type,
            "index": self.index,
            "data": dict(self.data),
        }
