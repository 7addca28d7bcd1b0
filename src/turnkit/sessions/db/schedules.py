"""Schedule rows: the latest instant each schedule claimed (see :mod:`..sources.schedules`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from turnkit._values import now as wall_now
from turnkit.sessions.db import schema as t
from turnkit.sessions.db.store import Store, Tx
from turnkit.sessions.model.events import ScheduleFailed, ScheduleSkipped
from turnkit.sessions.model.status import ACTIVE

__all__ = ["claim_instant", "fail_instant", "fired_instants", "schedule_row", "settle"]


def schedule_row(store: Store, schedule_id: str, now: float) -> Any:
    """The schedule's row; created on first sight with ``since`` = the minute of ``now``."""
    query = sa.select(t.schedules).where(t.schedules.c.id == schedule_id)
    with store.read() as conn:
        row = conn.execute(query).first()
    if row is not None:
        return row
    try:
        with store.write() as tx:
            tx.execute(
                t.schedules.insert().values(
                    id=schedule_id, since=now - now % 60, pending=False, updated_at=wall_now()
                )
            )
    except sa.exc.IntegrityError:
        pass  # another process created it first
    with store.read() as conn:
        return conn.execute(query).one()


def claim_instant(
    store: Store, schedule_id: str, overlap: str, due: datetime, session_id: str
) -> bool | None:
    """Claim ``due``: None if already claimed, True if skipped (overlap), False to fire."""
    stamp = due.timestamp()
    with store.write() as tx:
        row = _open_claim(tx, schedule_id, stamp)
        if row is None:
            return None
        busy = overlap == "skip" and row.turn_id is not None and _active(tx.conn, row.turn_id)
        tx.execute(
            t.schedules.update()
            .where(t.schedules.c.id == schedule_id)
            .values(
                fired_for=stamp,
                pending=not busy,
                session_id=session_id,
                updated_at=wall_now(),
            )
        )
        if busy:
            tx.emit(session_id, ScheduleSkipped(schedule_id, due.isoformat()))
        return busy


def fail_instant(
    store: Store, schedule_id: str, due: datetime, session_id: str, error: str
) -> bool:
    """Claim ``due`` as failed (its ``schedule.failed`` event in ``session_id``):
    whether this call claimed it (False: another process had)."""
    stamp = due.timestamp()
    with store.write() as tx:
        if _open_claim(tx, schedule_id, stamp) is None:
            return False
        statement = t.schedules.update().where(t.schedules.c.id == schedule_id)
        tx.execute(statement.values(fired_for=stamp, pending=False, updated_at=wall_now()))
        tx.emit(session_id, ScheduleFailed(schedule_id, due.isoformat(), error))
        return True


def _open_claim(tx: Tx, schedule_id: str, stamp: float) -> Any:
    """The schedule's row, locked, if the instant ``stamp`` is still to claim; else None."""
    row = tx.execute(
        sa.select(t.schedules).where(t.schedules.c.id == schedule_id).with_for_update()
    ).one()
    if row.pending or (row.fired_for is not None and row.fired_for >= stamp):
        return None
    return row


def _active(conn: sa.Connection, turn_id: str) -> bool:
    status = conn.execute(sa.select(t.turns.c.status).where(t.turns.c.id == turn_id)).scalar()
    return status in ACTIVE


def settle(store: Store, schedule_id: str, stamp: float, turn_id: str | None) -> None:
    """The claimed fire's input is stored (or could not be): no longer pending."""
    with store.write() as tx:
        tx.execute(
            t.schedules.update()
            .where(t.schedules.c.id == schedule_id, t.schedules.c.fired_for == stamp)
            .values(pending=False, turn_id=turn_id, updated_at=wall_now())
        )


def fired_instants(store: Store) -> dict[str, float | None]:
    """Each known schedule's latest claimed instant."""
    with store.read() as conn:
        return {row.id: row.fired_for for row in conn.execute(sa.select(t.schedules)).all()}
