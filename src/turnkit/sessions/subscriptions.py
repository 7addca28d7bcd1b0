"""Event subscriptions: another session's turn outcomes, delivered as inputs.

A subscriber watches one session (``to_session``) or every session of an
agent (``to_agent``). Each terminal turn there becomes exactly one input of
the subscriber (``source="event"``, no text, ``event`` filled), written in
the transaction that ends the turn, with the terminal event's id as its
idempotency key: none lost, none duplicated, also across kill -9. The input
is routed like any other: queued in order while the subscriber is busy,
held while it waits on a question. A session is never told of its own turns.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from turnkit.errors import SessionEndedError, SessionNotFoundError
from turnkit.sessions import schema as t
from turnkit.sessions._db import cut_utf8, new_id, now
from turnkit.sessions.inputs import EventInfo, EventResult
from turnkit.sessions.present import describe_event
from turnkit.sessions.routing import accept
from turnkit.sessions.store import NewInput

__all__ = ["MAX_ERROR_BYTES", "fan_out", "subscribe", "unsubscribe"]

MAX_ERROR_BYTES = 4 * 1024


def subscribe(store: Any, subscriber_id: str, to_session: str | None, to_agent: str | None) -> str:
    """Record the subscription (idempotent); its id."""
    with store.write() as tx:
        _check_session(tx, subscriber_id)
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
    store: Any, subscriber_id: str, to_session: str | None, to_agent: str | None
) -> bool:
    """Remove the subscription; whether there was one."""
    with store.write() as tx:
        found = tx.execute(_match(subscriber_id, to_session, to_agent)).first()
        if found is None:
            return False
        tx.execute(t.subscriptions.delete().where(t.subscriptions.c.id == found.id))
        return True


def _match(subscriber_id: str, to_session: str | None, to_agent: str | None) -> Any:
    c = t.subscriptions.c
    return sa.select(c.id).where(
        c.subscriber_id == subscriber_id,
        c.to_session.is_(None) if to_session is None else c.to_session == to_session,
        c.to_agent.is_(None) if to_agent is None else c.to_agent == to_agent,
    )


def _check_session(tx: Any, session_id: str, ended_ok: bool = False) -> None:
    row = tx.execute(sa.select(t.sessions.c.ended).where(t.sessions.c.id == session_id)).first()
    if row is None:
        raise SessionNotFoundError(session_id)
    if row.ended and not ended_ok:
        raise SessionEndedError(session_id)


def fan_out(
    store: Any,
    tx: Any,
    session_id: str,
    turn_id: str,
    event_id: int,
    outcome: dict[str, Any],
) -> None:
    """In the ending turn's transaction: one input per subscriber of this outcome."""
    agent = tx.execute(sa.select(t.sessions.c.agent).where(t.sessions.c.id == session_id)).scalar()
    c = t.subscriptions.c
    subscribers = tx.execute(
        sa.select(c.subscriber_id)
        .where(
            sa.or_(c.to_session == session_id, c.to_agent == agent),
            c.subscriber_id != session_id,
        )
        .distinct()
        .order_by(c.subscriber_id)
    ).all()
    if not subscribers:
        return
    event = _event_info(session_id, turn_id, agent, event_id, outcome)
    for (subscriber_id,) in subscribers:
        _deliver(store, tx, subscriber_id, event)


def _event_info(
    session_id: str, turn_id: str, agent: str, event_id: int, outcome: dict[str, Any]
) -> EventInfo:
    error = outcome.get("error")
    if error is not None:
        error, _ = cut_utf8(error, MAX_ERROR_BYTES)
    result = outcome.get("result")
    return EventInfo(
        id=event_id,
        type=outcome["type"],
        session_id=session_id,
        turn_id=turn_id,
        agent_id=agent,
        occurred_at=datetime.fromtimestamp(now(), UTC),
        reason=outcome.get("reason"),
        error=error,
        result=None if result is None else EventResult(result["text"], result["truncated"]),
    )


def _deliver(store: Any, tx: Any, subscriber_id: str, event: EventInfo) -> None:
    new = NewInput(
        "event",
        None,
        "null",
        {"event": event.to_dict()},
        idempotency_key=f"event:{event.id}",
        describe=describe_event(event),
    )
    with contextlib.suppress(SessionEndedError):  # an ended subscriber takes no more input
        accept(store, tx, subscriber_id, new)
