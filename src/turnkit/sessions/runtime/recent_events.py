"""The events this process just committed to the sessions someone follows here.

A follower woken by a commit of this process would read the log for the
events that commit wrote (a thread hop and a query, a few milliseconds on
a busy machine, on the way of every event, and of a turn's first live delta,
which waits for the events before it). The store hands each committed event
here, and a follower takes the next ones from memory when they are here
without a gap: seqs are gapless per session, so a run that starts at the
follower's next seq is exactly what the log holds. Anything else (another
process's events, one too large to keep, one forgotten) is read from the log
as before.

Bounded: only sessions followed in this process, only events whose data is
at most :data:`MAX_DATA` characters, the last :data:`PER_SESSION` of each
session, and at most :data:`KEPT` events and :data:`KEPT_CHARS` characters
of data for all of them together (the oldest go first: a follower reads
within milliseconds of its wake-up, so only the newest are asked for).
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Iterator

from turnkit.sessions.db.records import event_record
from turnkit.sessions.db.store import CommittedEvent
from turnkit.sessions.model.records import Event

__all__ = ["KEPT", "KEPT_CHARS", "MAX_DATA", "PER_SESSION", "RecentEvents"]

PER_SESSION = 64  # events kept of one session
KEPT = 1024  # events kept, of all followed sessions together
KEPT_CHARS = 8 * 1024 * 1024  # characters of their data
MAX_DATA = 64 * 1024  # characters of one event's JSON data kept (larger ones are read)


class _Kept:
    __slots__ = ("events", "followers", "top")

    def __init__(self) -> None:
        self.events: deque[CommittedEvent] = deque(maxlen=PER_SESSION)  # as handed over
        self.followers = 0
        self.top = 0  # the highest seq handed over, kept or not


class RecentEvents:
    """Per followed session, the last events committed by this process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[str, _Kept] = {}
        self._order: deque[tuple[_Kept, CommittedEvent]] = deque()  # all kept, oldest first
        self._chars = 0

    @contextlib.contextmanager
    def following(self, session_id: str) -> Iterator[None]:
        """Keep the session's events for the block (while anyone follows it here)."""
        with self._lock:
            kept = self._kept.get(session_id)
            if kept is None:
                kept = self._kept[session_id] = _Kept()
            kept.followers += 1
        try:
            yield
        finally:
            with self._lock:
                kept.followers -= 1
                if not kept.followers:
                    del self._kept[session_id]

    def committed(self, events: list[CommittedEvent]) -> None:
        """Take a commit's events (before its followers are woken)."""
        with self._lock:
            order = self._order
            for event in events:
                kept = self._kept.get(event.session_id)
                if kept is None:
                    continue
                kept.top = max(kept.top, event.seq)
                if len(event.data) <= MAX_DATA:
                    kept.events.append(event)
                    order.append((kept, event))
                    self._chars += len(event.data)
            while len(order) > KEPT or self._chars > KEPT_CHARS:
                kept, event = order.popleft()
                self._chars -= len(event.data)
                if kept.events and kept.events[0] is event:  # (or it went already)
                    kept.events.popleft()

    def after(self, session_id: str, seq: int, limit: int) -> tuple[list[Event], bool]:
        """The session's events from ``seq + 1`` on that are kept here without a gap
        (at most ``limit``), each decoded anew (none when the next one is not here);
        and whether they reach the last event this process handed over."""
        with self._lock:
            kept = self._kept.get(session_id)
            if kept is None:
                return [], False
            newer = sorted((e for e in kept.events if e.seq > seq), key=_seq)
            top = kept.top
        run: list[Event] = []
        for event in newer:  # commits may hand their events over out of order
            if event.seq != seq + 1 + len(run) or len(run) == limit:
                break
            run.append(event_record(event))
        return run, bool(run) and run[-1].seq == top


def _seq(event: CommittedEvent) -> int:
    return event.seq
