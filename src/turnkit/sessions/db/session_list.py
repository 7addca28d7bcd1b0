"""The list of sessions: newest first, filtered by agent and status, paged by a session id.

Order is ``created_at`` then ``id``, both descending, so that sessions
created in the same instant still have one order and a page that starts
``before`` a session never repeats nor skips one. A session's status is
derived (ended, an open question, an active turn), so the filter is too,
in the same query as the page.
"""

from __future__ import annotations

import sqlalchemy as sa

from turnkit.errors import InvalidInputError
from turnkit.sessions.db import schema as t
from turnkit.sessions.db.store import Store
from turnkit.sessions.model.records import Session
from turnkit.sessions.model.status import ACTIVE, SessionState

__all__ = ["list_sessions"]


def list_sessions(
    store: Store,
    agent: str | None,
    status: SessionState | None,
    limit: int,
    before: str | None,
) -> list[Session]:
    """At most ``limit`` sessions, newest first, older than session ``before`` if given."""
    s = t.sessions.c
    turn = t.turns.c
    busy = sa.exists().where(turn.session_id == s.id, turn.status.in_(ACTIVE))
    query = sa.select(t.sessions, busy.label("busy"))
    if agent is not None:
        query = query.where(s.agent == agent)
    if status is not None:
        query = query.where(_status_is(status, busy))
    with store.read() as conn:
        if before is not None:
            anchor = conn.execute(sa.select(s.created_at, s.id).where(s.id == before)).first()
            if anchor is None:
                raise InvalidInputError("before", f"no session {before!r} to page from")
            older = sa.or_(
                s.created_at < anchor.created_at,
                sa.and_(s.created_at == anchor.created_at, s.id < anchor.id),
            )
            query = query.where(older)
        rows = conn.execute(query.order_by(s.created_at.desc(), s.id.desc()).limit(limit)).all()
        return [store.session_record(conn, row, busy=bool(row.busy)) for row in rows]


def _status_is(status: SessionState, busy: sa.Exists) -> sa.ColumnElement[bool]:
    s = t.sessions.c
    if status is SessionState.ENDED:
        return s.ended == sa.true()
    open_ = sa.and_(s.ended == sa.false(), s.question.is_(None))
    if status is SessionState.AWAITING_INPUT:
        return sa.and_(s.ended == sa.false(), s.question.is_not(None))
    if status is SessionState.RUNNING:
        return sa.and_(open_, busy)
    return sa.and_(open_, ~busy)
