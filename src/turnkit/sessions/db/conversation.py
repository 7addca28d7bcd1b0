"""A session's stored conversation, in order: read once, then only what is new.

Stored messages never change and every new one gets the session's next
``position``, so what was read before is kept (for the sessions used last)
and a turn reads only the rows above the last position it saw: a turn of a
long session neither re-reads nor re-validates its history.

Order is by position, except for a ``compaction`` message, which stands in
its place: right before the first message it kept (``before_position``),
although it was written later. :func:`in_order` is that order in SQL; the
cache inserts such a message at its place when it reads it.

What a transaction read is forgotten if it rolls back (it may have seen its
own uncommitted rows).
"""

from __future__ import annotations

import bisect
import json
import threading
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnkit.messages import Message
from turnkit.sessions.db import schema as t
from turnkit.sessions.db.store import Tx

__all__ = ["CACHED_SESSIONS", "Conversation", "Conversations", "Stored", "in_order"]

CACHED_SESSIONS = 256
"""How many sessions' conversations a process keeps (the ones used last)."""

# The session's messages after the last one a turn has read.
_m = t.messages.c
_AFTER = (
    sa.select(_m.position, _m.before_position, _m.turn_id, _m.turn_index, _m.message)
    .where(_m.session_id == sa.bindparam("sid"), _m.position > sa.bindparam("last"))
    .order_by(_m.position)
)


@dataclass(frozen=True, slots=True)
class Stored:
    """One stored message with where it is: its row's position, the position it
    stands before (a compaction message) and the turn that wrote it."""

    position: int
    before: int | None
    turn_id: str
    turn_index: int
    message: Message

    @property
    def order(self) -> tuple[int, int, int]:
        if self.before is None:
            return (self.position, 1, self.position)
        return (self.before, 0, self.position)


@dataclass(frozen=True, slots=True)
class Conversation:
    """A session's stored messages in order, and the highest position read.

    ``summaries`` are the compaction messages turns wrote, in the order they
    were written (by position), so that a reader can tell whether one was
    written after a given message without a walk of the whole conversation.
    """

    last: int
    entries: tuple[Stored, ...]
    messages: tuple[Message, ...]  # the entries' messages, kept to hand out without a walk
    summaries: tuple[Stored, ...] = ()


EMPTY = Conversation(0, (), ())


def in_order(query: Any) -> Any:
    """``query`` on ``turnkit_messages`` ordered as the conversation is."""
    m = t.messages.c
    placed = sa.case((m.before_position.is_(None), 1), else_=0)
    return query.order_by(sa.func.coalesce(m.before_position, m.position), placed, m.position)


class Conversations:
    """The stored conversations of the sessions used last, read incrementally."""

    def __init__(self, size: int = CACHED_SESSIONS) -> None:
        self._size = size
        self._cache: dict[str, Conversation] = {}
        self._lock = threading.Lock()

    def read(self, tx: Tx, session_id: str) -> Conversation:
        """The session's conversation as ``tx`` sees it (rows above the cached ones read)."""
        tx.on_rollback(lambda: self.forget(session_id))
        return self._read(tx.conn, session_id)

    def read_committed(self, conn: sa.Connection, session_id: str) -> Conversation:
        """:meth:`read` on a read connection (it sees only committed rows)."""
        return self._read(conn, session_id)

    def _read(self, conn: sa.Connection, session_id: str) -> Conversation:
        with self._lock:
            known = self._cache.pop(session_id, EMPTY)
        rows = conn.execute(_AFTER, {"sid": session_id, "last": known.last}).all()
        current = _with(known, rows) if rows else known
        with self._lock:
            self._cache[session_id] = current  # the last used goes last
            while len(self._cache) > self._size:
                self._cache.pop(next(iter(self._cache)))
        return current

    def peek(self, session_id: str) -> Conversation | None:
        """The conversation last read for the session, if this process keeps it."""
        with self._lock:
            return self._cache.get(session_id)

    def forget(self, session_id: str) -> None:
        with self._lock:
            self._cache.pop(session_id, None)


def _with(known: Conversation, rows: Any) -> Conversation:
    """``known`` with the rows read after it (ordered by position)."""
    fresh = [
        Stored(
            r.position,
            r.before_position,
            r.turn_id,
            r.turn_index,
            Message.from_dict(json.loads(r.message)),
        )
        for r in rows
    ]
    last = fresh[-1].position
    if all(s.before is None for s in fresh):  # the usual case: each goes last
        entries = known.entries + tuple(fresh)
        messages = known.messages + tuple(s.message for s in fresh)
        return Conversation(last, entries, messages, known.summaries)
    placed = list(known.entries)
    for stored in fresh:
        bisect.insort(placed, stored, key=lambda s: s.order)
    summaries = known.summaries + tuple(s for s in fresh if s.before is not None)
    return Conversation(last, tuple(placed), tuple(s.message for s in placed), summaries)
