"""The SQL of live output: the deltas of model calls still streaming.

Live deltas are not events: they live in ``turnkit_live`` only while their
model call streams, so that a follower joining mid-message (in any process)
reads them from the start of that call. The rows of a call are marked done
in the transaction that records its reply (:func:`mark_done`, with the durable
``message`` event) or ends the turn, and deleted :data:`KEEP_S` later: a
follower that is given the reply before a watcher brought it the last deltas
reads them then (:func:`closing`). The table holds the replies being written
now and those of the last few seconds.

Other processes learn of new rows on Postgres through ``NOTIFY
turnkit_live`` sent in the inserting transaction (delivered at commit). Its
payload carries the rows themselves when they fit under Postgres's limit of
8000 bytes, else only their ids (the listener reads those). On SQLite a
watcher polls the table by id (:func:`newer`): the commits of one database
file are serialized, so ids appear in order and none is skipped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnkit.sessions.db import schema as t
from turnkit.sessions.db.prepared import Prepared
from turnkit.sessions.db.store import Tx
from turnkit.sessions.model.live import LiveEvent

__all__ = [
    "CHANNEL",
    "KEEP_S",
    "NOTIFY_LIMIT",
    "SWEEP_EVERY_S",
    "LiveRow",
    "by_ids",
    "closing",
    "current",
    "decode_notify",
    "insert",
    "last_id",
    "mark_done",
    "newer",
    "turn_start_seq",
]

CHANNEL = "turnkit_live"
NOTIFY_LIMIT = 7900  # bytes: Postgres refuses a NOTIFY payload of 8000 or more
KEEP_S = 30.0  # how long a call's deltas are kept once its reply is recorded
_SWEEP = 1000  # old rows one sweep deletes at most (the next one deletes more)
SWEEP_EVERY_S = 1.0


@dataclass(frozen=True, slots=True)
class LiveRow:
    """One stored delta: its row id, the attempt (``stream``) it belongs to, the event."""

    id: int
    stream: str
    event: LiveEvent


_COLUMNS = (
    t.live.c.id,
    t.live.c.session_id,
    t.live.c.turn_id,
    t.live.c.stream,
    t.live.c.idx,
    t.live.c.after_seq,
    t.live.c.type,
    t.live.c.data,
)


def _row(values: Sequence[Any]) -> LiveRow:
    row_id, session_id, turn_id, stream, index, after_seq, kind, data = values
    event = LiveEvent(session_id, turn_id, after_seq, kind, index, json.loads(data))
    return LiveRow(row_id, stream, event)


# Built once: the statements of every delta, with bind parameters.
_INSERT = Prepared(t.live.insert())
_DELETE_CALL = Prepared(
    t.live.delete().where(
        t.live.c.turn_id == sa.bindparam("tid"), t.live.c.step == sa.bindparam("call")
    )
)


def insert(tx: Tx, step: str, stream: str, events: Sequence[LiveEvent]) -> list[LiveRow]:
    """Store ``events`` (one model call's, in order); on Postgres, NOTIFY them."""
    first = events[0]
    if first.index == 0:  # an earlier attempt at this call (before a crash) is over
        tx.execute(_DELETE_CALL, {"tid": first.turn_id, "call": step})
    rows = []
    for event in events:
        data = json.dumps(event.data, ensure_ascii=False)
        values = {
            "session_id": event.session_id,
            "turn_id": event.turn_id,
            "step": step,
            "stream": stream,
            "idx": event.index,
            "after_seq": event.after_seq,
            "type": event.type,
            "data": data,
        }
        inserted = tx.execute(_INSERT, values)
        rows.append(LiveRow(int(inserted.inserted_primary_key[0]), stream, event))
    if tx.conn.dialect.name == "postgresql":
        tx.execute(sa.text("SELECT pg_notify(:channel, :payload)"), _payloads(rows))
    return rows


def _payloads(rows: list[LiveRow]) -> list[dict[str, str]]:
    """NOTIFY payloads for ``rows``: the rows themselves while they fit, else their ids."""
    payloads: list[dict[str, str]] = []
    batch: list[list[Any]] = []
    size = 2
    for row in rows:
        e = row.event
        item = [row.id, e.session_id, e.turn_id, row.stream, e.index, e.after_seq, e.type]
        item.append(json.dumps(e.data, ensure_ascii=False))
        length = len(json.dumps(item, ensure_ascii=False).encode()) + 1
        if length + 2 > NOTIFY_LIMIT:  # too big alone: the listener reads it by id
            payloads.append({"channel": CHANNEL, "payload": json.dumps({"ids": [row.id]})})
            continue
        if size + length > NOTIFY_LIMIT:
            payloads.append({"channel": CHANNEL, "payload": json.dumps(batch)})
            batch, size = [], 2
        batch.append(item)
        size += length
    if batch:
        payloads.append({"channel": CHANNEL, "payload": json.dumps(batch, ensure_ascii=False)})
    return payloads


def decode_notify(payload: str) -> tuple[list[LiveRow], list[int]]:
    """The rows a NOTIFY payload carries, and the ids of those to read."""
    value = json.loads(payload)
    if isinstance(value, dict):
        return [], [int(i) for i in value.get("ids", ())]
    return [_row(item) for item in value], []


_live = t.live.c
_DONE_ALL = (
    t.live.update()
    .where(_live.turn_id == sa.bindparam("tid"), _live.done_at.is_(None))
    .values(done_at=sa.bindparam("now"))
)
_DONE_STEP = Prepared(_DONE_ALL.where(_live.step == sa.bindparam("call")))
_DONE_ALL = Prepared(_DONE_ALL)
_OLD = sa.select(_live.id).where(_live.done_at < sa.bindparam("before")).limit(_SWEEP)
_SWEEP_OLD = t.live.delete().where(_live.id.in_(_OLD.scalar_subquery()))
# On Postgres, rows another turn's end is deleting are skipped (no waits between ends).
_SWEEP_OLD_SKIPPING = t.live.delete().where(
    _live.id.in_(_OLD.with_for_update(skip_locked=True).scalar_subquery())
)


def mark_done(tx: Tx, turn_id: str, step: str | None = None) -> None:
    """Mark the deltas of the turn's model call ``step`` (None: of every call) done;
    delete those done more than :data:`KEEP_S` ago (a process looks at most every
    :data:`SWEEP_EVERY_S`)."""
    now = time.time()
    if step is None:
        tx.execute(_DONE_ALL, {"tid": turn_id, "now": now})
    else:
        tx.execute(_DONE_STEP, {"tid": turn_id, "now": now, "call": step})
    if now - tx.store.live_swept_at >= SWEEP_EVERY_S or now < tx.store.live_swept_at:
        tx.store.live_swept_at = now
        sweep = _SWEEP_OLD_SKIPPING if tx.conn.dialect.name == "postgresql" else _SWEEP_OLD
        tx.execute(sweep, {"before": now - KEEP_S})


def current(conn: sa.Connection, session_id: str) -> list[LiveRow]:
    """The stored deltas of the session's model calls still streaming, in order."""
    live = t.live.c
    query = sa.select(*_COLUMNS).where(live.session_id == session_id, live.done_at.is_(None))
    return [_row(values) for values in conn.execute(query.order_by(live.id))]


def closing(
    conn: sa.Connection, session_id: str, turn_id: str, seqs: tuple[int, int]
) -> list[tuple[LiveRow, float | None]]:
    """The deltas of the turn that stand at or after event ``seqs[0]`` and before
    ``seqs[1]`` (the event that closes their call), in order, each with when its
    call was done (None: still streaming). One read serves every follower that
    asks meanwhile: each keeps those of calls still streaming when it subscribed."""
    live = t.live.c
    query = sa.select(*_COLUMNS, live.done_at).where(
        live.session_id == session_id,
        live.turn_id == turn_id,
        live.after_seq >= seqs[0],
        live.after_seq < seqs[1],
    )
    return [(_row(values[:-1]), values[-1]) for values in conn.execute(query.order_by(live.id))]


def newer(conn: sa.Connection, after_id: int, limit: int = 1000) -> list[LiveRow]:
    """The deltas stored after row ``after_id``, in order (SQLite's watcher)."""
    query = sa.select(*_COLUMNS).where(t.live.c.id > after_id).order_by(t.live.c.id).limit(limit)
    return [_row(values) for values in conn.execute(query)]


def by_ids(conn: sa.Connection, ids: Sequence[int]) -> list[LiveRow]:
    query = sa.select(*_COLUMNS).where(t.live.c.id.in_(list(ids))).order_by(t.live.c.id)
    return [_row(values) for values in conn.execute(query)]


def last_id(conn: sa.Connection) -> int:
    return int(conn.execute(sa.select(sa.func.max(t.live.c.id))).scalar() or 0)


def turn_start_seq(conn: sa.Connection, session_id: str, turn_id: str) -> int | None:
    """The seq of the turn's first event (where a chat stream of it starts)."""
    e = t.events.c
    query = sa.select(sa.func.min(e.seq)).where(e.session_id == session_id, e.turn_id == turn_id)
    found = conn.execute(query).scalar()
    return None if found is None else int(found)
