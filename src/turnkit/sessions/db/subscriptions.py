"""Subscription rows: who watches which session or agent (see :mod:`..sources.subscriptions`).

Subscribing and unsubscribing lock the subscriber's session row, so two
concurrent calls for one subscriber run one after the other (the unique
indexes of :mod:`.schema` are the backstop): one row per subscription, and
an unsubscribe removes it for good.
"""

from __future__ import annotations

import sqlalchemy as sa

from turnkit._values import new_id, now
from turnkit.errors import SessionEndedError, SessionNotFoundError
from turnkit.sessions.db import schema as t
from turnkit.sessions.db.prepared import Prepared
from turnkit.sessions.db.store import Store, Tx

__all__ = ["subscribe", "subscribers_of", "unsubscribe"]


def subscribe(
    store: Store, subscriber_id: str, to_session: str | None, to_agent: str | None
) -> str:
    """Record the subscription (idempotent); its id."""
    with store.write() as tx:
        _check_session(tx, subscriber_id, lock=True)
        if to_session is not None:
            _check_session(tx, to_session, ended_ok=True)
        found = tx.execute(_match(subscriber_id, to_session, to_agent)).first()
        if found is not None:
            return str(found.id)
        subscription_id = new_id("sub")
        tx.execute(
            t.subscriptions.insert().values(
                id=subscription_id,
                subscriber_id=subscriber_id,
                to_session=to_session,
                to_agent=to_agent,
                created_at=now(),
            )
        )
        return subscription_id


def unsubscribe(
    store: Store, subscriber_id: str, to_session: str | None, to_agent: str | None
) -> bool:
    """Remove the subscription; whether there was one."""
    with store.write() as tx:
        _check_session(tx, subscriber_id, ended_ok=True, lock=True)
        found = [row.id for row in tx.execute(_match(subscriber_id, to_session, to_agent))]
        if found:  # every copy: a database from before version 4 may hold several
            tx.execute(t.subscriptions.delete().where(t.subscriptions.c.id.in_(found)))
        return bool(found)


_c = t.subscriptions.c
_SUBSCRIBERS = Prepared(
    sa.select(_c.subscriber_id)
    .where(
        sa.or_(_c.to_session == sa.bindparam("sid"), _c.to_agent == sa.bindparam("agent")),
        _c.subscriber_id != sa.bindparam("sid"),
    )
    .distinct()
    .order_by(_c.subscriber_id)
)


def subscribers_of(tx: Tx, session_id: str, agent: str) -> list[str]:
    """The sessions told of this session's outcomes (never the session itself)."""
    rows = tx.execute(_SUBSCRIBERS, {"sid": session_id, "agent": agent}).all()
    return [row.subscriber_id for row in rows]


def _match(subscriber_id: str, to_session: str | None, to_agent: str | None) -> sa.Select:
    c = t.subscriptions.c
    return sa.select(c.id).where(
        c.subscriber_id == subscriber_id,
        c.to_session.is_(None) if to_session is None else c.to_session == to_session,
        c.to_agent.is_(None) if to_agent is None else c.to_agent == to_agent,
    )


def _check_session(tx: Tx, session_id: str, ended_ok: bool = False, lock: bool = False) -> None:
    if lock:
        row = tx.lock_session(session_id)
    else:
        query = sa.select(t.sessions.c.ended).where(t.sessions.c.id == session_id)
        row = tx.execute(query).first()
    if row is None:
        raise SessionNotFoundError(session_id)
    if row.ended and not ended_ok:
        raise SessionEndedError(session_id)
