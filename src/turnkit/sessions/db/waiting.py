"""Runners waiting for a process: the queue of session runners no process started yet.

A runner is named in the transaction that queues its session's first turn
(:mod:`turnkit.sessions.runtime.dispatch`). The process that names it starts
it at once when it runs turns and has a free slot; otherwise the runner
waits here, and a process with a free slot takes it: :func:`take` deletes the
oldest rows in one statement (on Postgres skipping rows another process is
taking at that moment), and the taker starts each runner after the commit.

Reading whether anything waits (:func:`anything_waits`) is a one-row read,
cheap enough to ask every polling interval; only a process that finds
something opens a write. A taker that dies between its commit and the start
leaves a named runner that DBOS has never heard of and that no longer waits
here: the recovery of that executor (its restart, or a takeover of its
lapsed lease) starts it.
"""

from __future__ import annotations

import time

import sqlalchemy as sa

from turnkit.sessions.db import schema as t
from turnkit.sessions.db.store import Tx

__all__ = ["anything_waits", "take", "wait", "waiting_ids"]

_w = t.waiting_runners
_ANY = sa.select(_w.c.runner_id).limit(1)
_WAIT = _w.insert().values(
    runner_id=sa.bindparam("runner_id"), session_id=sa.bindparam("sid"), since=sa.bindparam("at")
)
_OLDEST = (
    sa.select(_w.c.runner_id)
    .order_by(_w.c.since, _w.c.runner_id)
    .limit(sa.bindparam("n"))
    .with_for_update(skip_locked=True)
)
_TAKE = (
    _w.delete()
    .where(_w.c.runner_id.in_(_OLDEST.scalar_subquery()))
    .returning(_w.c.runner_id, _w.c.session_id, _w.c.since)
)


def wait(tx: Tx, runner_id: str, session_id: str) -> None:
    """In the transaction that names ``runner_id``: it waits for a process."""
    tx.execute(_WAIT, {"runner_id": runner_id, "sid": session_id, "at": time.time()})


def anything_waits(engine: sa.Engine) -> bool:
    with engine.connect() as conn:
        return conn.execute(_ANY).first() is not None


def take(tx: Tx, limit: int) -> list[tuple[str, str]]:
    """Take up to ``limit`` waiting runners, oldest first: (runner id, session id)."""
    rows = tx.execute(_TAKE, {"n": limit}).all()
    return [(row.runner_id, row.session_id) for row in sorted(rows, key=lambda r: r.since)]


def waiting_ids(conn: sa.Connection) -> set[str]:
    return set(conn.execute(sa.select(_w.c.runner_id)).scalars())
