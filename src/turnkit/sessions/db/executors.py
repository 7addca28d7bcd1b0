"""Executor leases: which process holds which executor id, and until when.

Every started App keeps one row of ``turnkit_executors`` under its executor
id (the id DBOS runs its workflows under), renewed by
:class:`turnkit.sessions.runtime.executors.ExecutorLease`. A row's states::

    live ──stop──► released ─┐
      └──lease lapses────────┴──claimed by a live process──► taking ──► taken

A process that stalled past its lease (paused, swapped out, cut off) and
finds its id taken holds it again under a new ``holder`` once the takeover
is done. Its runners' writes are *fenced* (:func:`holds`): each checks, in
its own transaction, that the row still names the holder the runner started
under and is live, so a runner whose turns another process took over can
write nothing more (:class:`LeaseLost`).

Every change is an ``UPDATE ... WHERE`` whose row count says whether it
applied (as in :mod:`.turns`), so two processes racing for one id, or two
live processes racing to take over one lapsed executor, get one outcome.
Times come from the database's clock on Postgres (processes on several
machines compare one clock), from this machine's on SQLite (one machine).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnkit.sessions.db import schema as t
from turnkit.sessions.db.prepared import Prepared

__all__ = [
    "Holder",
    "LeaseLost",
    "LeaseRow",
    "acquire",
    "claim_lapsed",
    "db_now",
    "holds",
    "listed",
    "mark_taken",
    "release",
    "renew",
]

LIVE, RELEASED, TAKING, TAKEN = "live", "released", "taking", "taken"
PRUNE_AFTER_S = 24 * 3600.0  # taken rows are kept this long for `turnkit status`

_c = t.executors.c


class LeaseLost(BaseException):
    """A runner's write was refused: its turns are another process's now.

    A ``BaseException``, like ``CancelledError``: nothing between the write
    and the runner (a tool's or the agent loop's ``except Exception``) may
    take it for a failure and go on.
    """


@dataclass(frozen=True, slots=True)
class Holder:
    """The process that wants (or holds) an executor id."""

    executor_id: str
    holder: str  # unique per process start
    host: str
    pid: int
    runs_turns: bool
    max_running: int


@dataclass(frozen=True, slots=True)
class LeaseRow:
    """One executor's lease as stored."""

    id: str
    holder: str
    host: str
    pid: int
    runs_turns: bool
    max_running: int
    state: str
    started_at: float
    renewed_at: float
    lease_until: float
    taken_by: str | None
    taken_at: float | None

    @classmethod
    def of(cls, row: Any) -> LeaseRow:
        return cls(**{name: getattr(row, name) for name in cls.__slots__})


def db_now(conn: sa.Connection) -> float:
    """Now, in UNIX seconds, by the clock every process on this database shares."""
    if conn.dialect.name == "postgresql":
        return float(conn.execute(sa.text("SELECT extract(epoch FROM clock_timestamp())")).scalar())
    return time.time()


def _locked(conn: sa.Connection, executor_id: str) -> Any:
    query = sa.select(t.executors).where(_c.id == executor_id)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update()
    return conn.execute(query).first()


def acquire(engine: sa.Engine, me: Holder, lease_s: float) -> LeaseRow | None:
    """Take ``me.executor_id`` for ``lease_s`` seconds: None when taken, else the row
    of the live process that holds it (try again once its lease lapses)."""
    with engine.begin() as conn:
        stamp = db_now(conn)
        values = {
            "holder": me.holder,
            "host": me.host[:255],
            "pid": me.pid,
            "runs_turns": me.runs_turns,
            "max_running": me.max_running,
            "state": LIVE,
            "started_at": stamp,
            "renewed_at": stamp,
            "lease_until": stamp + lease_s,
            "taken_by": None,
            "taken_at": None,
        }
        row = _locked(conn, me.executor_id)
        if row is None:
            insert = _insert_ignoring_conflict(conn, {"id": me.executor_id, **values})
            if conn.execute(insert).rowcount:
                return None
            row = _locked(conn, me.executor_id)  # another process inserted it meanwhile
        taken = conn.execute(
            t.executors.update()
            .where(_c.id == me.executor_id)
            .where(sa.or_(_c.lease_until < stamp, _c.holder == me.holder))
            .values(values)
        )
        return None if taken.rowcount else LeaseRow.of(row)


_HOLDER = sa.select(_c.holder, _c.state).where(_c.id == sa.bindparam("id"))
_HOLDER_SHARED = _HOLDER.with_for_update(read=True)
_HOLDER = Prepared(_HOLDER)


def holds(conn: sa.Connection, executor_id: str, holder: str) -> bool:
    """Whether ``holder`` still holds ``executor_id`` (in a write transaction).

    On Postgres the row is read ``FOR SHARE``: a takeover's claim (an UPDATE
    of this row) cannot lock it while writes are in flight, and every write
    after the claim sees the row taken. On SQLite writers take turns anyway.
    """
    if conn.dialect.name == "postgresql":
        row = conn.execute(_HOLDER_SHARED, {"id": executor_id}).first()
    else:
        row = _HOLDER.run(conn, {"id": executor_id}).first()
    return row is not None and row.holder == holder and row.state == LIVE


def _insert_ignoring_conflict(conn: sa.Connection, values: dict[str, Any]) -> Any:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(t.executors).values(values).on_conflict_do_nothing(index_elements=["id"])


def renew(engine: sa.Engine, me: Holder, lease_s: float) -> bool:
    """Extend my lease; False when it is no longer mine (it lapsed and was taken)."""
    with engine.begin() as conn:
        stamp = db_now(conn)
        renewed = conn.execute(
            t.executors.update()
            .where(_c.id == me.executor_id, _c.holder == me.holder, _c.state == LIVE)
            .values(renewed_at=stamp, lease_until=stamp + lease_s)
        )
    return bool(renewed.rowcount)


def release(engine: sa.Engine, me: Holder) -> None:
    """Give the id up at once: what it leaves unfinished is free for a live process."""
    with engine.begin() as conn:
        stamp = db_now(conn)
        conn.execute(
            t.executors.update()
            .where(_c.id == me.executor_id, _c.holder == me.holder, _c.state == LIVE)
            .values(state=RELEASED, lease_until=stamp)
        )


def claim_lapsed(engine: sa.Engine, me: Holder, lease_s: float) -> list[str]:
    """Claim, in one transaction, the executors whose lease lapsed (not mine): their
    turns are mine to take over. A claim lapses too, if I die taking them over."""
    with engine.begin() as conn:
        stamp = db_now(conn)
        query = sa.select(_c.id).where(
            _c.lease_until < stamp, _c.state != TAKEN, _c.id != me.executor_id
        )
        if conn.dialect.name == "postgresql":
            query = query.with_for_update(skip_locked=True)
        lapsed = [row.id for row in conn.execute(query.order_by(_c.lease_until).limit(20))]
        claimed = []
        for executor_id in lapsed:
            taken = conn.execute(
                t.executors.update()
                .where(_c.id == executor_id, _c.lease_until < stamp, _c.state != TAKEN)
                .values(state=TAKING, taken_by=me.executor_id, lease_until=stamp + lease_s)
            )
            if taken.rowcount:
                claimed.append(executor_id)
        conn.execute(
            t.executors.delete().where(_c.state == TAKEN, _c.taken_at < stamp - PRUNE_AFTER_S)
        )
    return claimed


def mark_taken(engine: sa.Engine, executor_id: str, me: Holder) -> bool:
    """The takeover of ``executor_id`` is done: its lease stays lapsed, for anyone."""
    with engine.begin() as conn:
        stamp = db_now(conn)
        done = conn.execute(
            t.executors.update()
            .where(_c.id == executor_id, _c.state == TAKING, _c.taken_by == me.executor_id)
            .values(state=TAKEN, taken_at=stamp, lease_until=stamp)
        )
    return bool(done.rowcount)


def listed(engine: sa.Engine) -> tuple[float, list[LeaseRow]]:
    """Now, and every executor's lease, live ones first, then by id."""
    with engine.connect() as conn:
        stamp = db_now(conn)
        rows = conn.execute(sa.select(t.executors).order_by(_c.id)).all()
    leases = [LeaseRow.of(row) for row in rows]
    leases.sort(key=lambda lease: (lease.lease_until < stamp, lease.id))
    return stamp, leases
