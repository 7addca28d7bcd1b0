"""Webhook deliveries by ``webhook-id``: a replay goes where the first delivery went.

A delivery's ``webhook-id`` is its idempotency key for the whole webhook, not
only within one session: ``session_key`` may route by the payload, and a
replay with another body must not open a second session. The first
delivery of an id opens (or finds) its session, claims the id and stores the
input in one transaction; a claim that loses a race rolls all of it back (a
session it opened too), and the input goes to the winner's session, where
its idempotency key makes it a duplicate.
"""

from __future__ import annotations

import sqlalchemy as sa

from turnkit._values import now
from turnkit.sessions.db import schema as t
from turnkit.sessions.db.inputs import NewInput, accept
from turnkit.sessions.db.store import Store, Tx
from turnkit.sessions.model.records import Receipt

__all__ = ["accept_delivery", "session_of"]

_ATTEMPTS = 3


class _Claimed(Exception):
    """Another transaction claimed the delivery first: roll this one back."""


def session_of(store: Store, webhook_id: str, message_id: str) -> str | None:
    """The session a delivery of this id went to, or None for a new id."""
    with store.read() as conn:
        return _session_of(conn, webhook_id, message_id)


def accept_delivery(
    store: Store, agent: str, key: str, webhook_id: str, message_id: str, new: NewInput
) -> tuple[str, Receipt]:
    """Store the delivery's input in the session of ``key`` (opened if need be), or, when
    the id was delivered before, in that delivery's session; the session and the receipt."""
    for _ in range(_ATTEMPTS):
        try:
            with store.write() as tx:
                return _deliver(tx, store, agent, key, webhook_id, message_id, new)
        except _Claimed:
            continue
    raise RuntimeError(f"webhook {webhook_id!r}: delivery {message_id!r} kept losing its claim")


def _deliver(
    tx: Tx, store: Store, agent: str, key: str, webhook_id: str, message_id: str, new: NewInput
) -> tuple[str, Receipt]:
    found = _session_of(tx.conn, webhook_id, message_id)
    if found is not None:
        return found, accept(tx, found, new)
    session, _ = store.open_in(tx, agent, key, {}, None)
    values = {
        "webhook_id": webhook_id,
        "message_id": message_id,
        "session_id": session.id,
        "received_at": now(),
    }
    if tx.execute(_claim(tx.conn, values)).first() is None:
        raise _Claimed  # Postgres waited for the other claim to commit
    return session.id, accept(tx, session.id, new)


def _session_of(conn: sa.Connection, webhook_id: str, message_id: str) -> str | None:
    c = t.webhook_deliveries.c
    query = sa.select(c.session_id).where(c.webhook_id == webhook_id, c.message_id == message_id)
    row = conn.execute(query).first()
    return None if row is None else str(row.session_id)


def _claim(conn: sa.Connection, values: dict[str, object]) -> sa.Insert:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    table = t.webhook_deliveries
    return insert(table).values(**values).on_conflict_do_nothing().returning(table.c.session_id)
