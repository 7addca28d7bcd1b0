"""What the pipeline made of each session's conversation, kept from one turn to the next.

A turn hands the agent loop its session's conversation, which only grows
(and its messages are immutable), so the conversion for a provider
(:class:`~turnkit.messages.history.LlmConversion`) is kept per session
for the sessions used last, and a turn converts only the messages that are
new since the last one. The conversion matches what it is given against
what it kept, message by message, so a compaction or a fork needs no
invalidation: what differs is converted anew.
"""

from __future__ import annotations

import threading

from turnkit.messages.history import LlmConversion

__all__ = ["KEPT_SESSIONS", "KeptConversions"]

KEPT_SESSIONS = 256


class KeptConversions:
    """One :class:`LlmConversion` per session, for the ``size`` sessions used last."""

    def __init__(self, size: int = KEPT_SESSIONS) -> None:
        self._size = size
        self._kept: dict[str, LlmConversion] = {}
        self._lock = threading.Lock()

    def of(self, session_id: str) -> LlmConversion:
        """The session's conversion (a new one the first time, or after it was dropped)."""
        with self._lock:
            found = self._kept.pop(session_id, None) or LlmConversion()
            self._kept[session_id] = found  # the last used goes last
            while len(self._kept) > self._size:
                self._kept.pop(next(iter(self._kept)))
        return found
