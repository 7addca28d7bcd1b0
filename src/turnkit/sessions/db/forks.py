"""Forks: a new session of the same agent whose conversation is a copy of another's start.

One transaction reads the source's conversation (in order, compaction
messages in their place), checks the cut, creates the session and copies
the first ``at`` messages as they are stored; nothing else is copied (no
turns, events, session data or links) and the source is unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from turnkit._values import dumps
from turnkit.agent.compaction import cut_index
from turnkit.errors import InvalidInputError, SessionNotFoundError
from turnkit.messages import Message, ToolUseBlock
from turnkit.sessions.db import schema as t
from turnkit.sessions.db.conversation import in_order
from turnkit.sessions.db.store import (
    Store,
    Tx,
    by_key,
    insert_ignoring_conflict,
    new_session_values,
)
from turnkit.sessions.model.records import Session

__all__ = ["fork_session"]


def fork_session(
    store: Store, source_id: str, at: int | None, key: str | None
) -> tuple[Session, bool]:
    """Fork ``source_id`` after its first ``at`` messages (None: all of them).

    The fork, and whether it is new: with a ``key`` that already names a
    fork of the same session (at the same ``at``, when given), that fork
    comes back, so a retried request makes one fork. A key that names any
    other session, an ``at`` past the end or one that would separate a tool
    call from its result (or thinking from its reply) raise
    :class:`~turnkit.InvalidInputError`; an unknown source
    :class:`~turnkit.SessionNotFoundError`.
    """
    with store.write() as tx:
        source = tx.execute(sa.select(t.sessions).where(t.sessions.c.id == source_id)).first()
        if source is None:
            raise SessionNotFoundError(source_id)
        rows = tx.execute(
            in_order(sa.select(t.messages.c.message).where(t.messages.c.session_id == source_id))
        ).all()
        count = len(rows) if at is None else _checked_at(rows, at, source_id)
        if key is not None:
            found = tx.execute(by_key(source.agent, key)).first()
            if found is not None:
                return _same_fork(store, tx, found, source_id, at, key), False
        values = new_session_values(source.agent, key, {}, None)
        values["forked_from"] = dumps({"session_id": source_id, "at": count})
        if key is None:
            tx.execute(t.sessions.insert().values(**values))
        else:  # Postgres: another transaction may take the key meanwhile
            if tx.execute(insert_ignoring_conflict(tx.conn, values)).first() is None:
                found = tx.execute(by_key(source.agent, key)).one()
                return _same_fork(store, tx, found, source_id, at, key), False
        _copy(tx, values["id"], [row.message for row in rows[:count]])
        row = tx.execute(sa.select(t.sessions).where(t.sessions.c.id == values["id"])).one()
        return store.session_record(tx.conn, row, busy=False), True


def _checked_at(rows: Any, at: int, source_id: str) -> int:
    if at > len(rows):
        raise InvalidInputError(
            "at", f"is {at}, but session {source_id!r} has {len(rows)} messages"
        )
    if 0 < at < len(rows):
        pair = [Message.from_dict(json.loads(rows[i].message)) for i in (at - 1, at)]
        if cut_index(pair, 1) != 1:  # the rule compaction cuts by
            calls = any(type(b) is ToolUseBlock for b in pair[0].content)
            what = "a tool call" if calls else "thinking"
            whose = "its result" if calls else "the reply it belongs to"
            raise InvalidInputError(
                "at",
                f"{at} would separate {what} (message {at - 1}) from {whose} (message {at}) "
                f"in session {source_id!r}; fork where an exchange ends",
            )
    return at


def _same_fork(store: Store, tx: Tx, row: Any, source_id: str, at: int | None, key: str) -> Session:
    """The session of ``key`` if it is this fork already; refused otherwise."""
    session = store.session_record(tx.conn, row)
    forked = session.forked_from
    if forked is None or forked.session_id != source_id or (at is not None and forked.at != at):
        where = "" if at is None else f" at {at}"
        raise InvalidInputError(
            "key",
            f"{key!r} already names session {session.id!r} of agent {session.agent!r}, "
            f"which is not a fork of session {source_id!r}{where}; use another key",
        )
    return session


def _copy(tx: Tx, session_id: str, messages: list[str]) -> None:
    """The stored messages, as they are, as the new session's first positions."""
    if not messages:
        return
    turn_id = f"fork_{session_id}"  # copied messages belong to no turn of the fork
    tx.execute(
        t.messages.insert(),
        [
            {
                "session_id": session_id,
                "position": index + 1,
                "turn_id": turn_id,
                "turn_index": index,
                "message": message,
            }
            for index, message in enumerate(messages)
        ],
    )
    statement = t.sessions.update().where(t.sessions.c.id == session_id)
    tx.execute(statement.values(message_seq=len(messages)))
