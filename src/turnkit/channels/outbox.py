"""Replies owed to channels: written with the turn's end, delivered later, never lost.

A session opened by a channel (Slack, Linear) is *linked*: a row says where
its replies go. When a linked session's turn ends, :func:`queue_outcome`
writes one outbox row in the transaction that ends it (the final text, the
question asked, the failure, the tool calls made), so a crash cannot end a
turn and lose its reply. The channel's delivery task claims due rows with a
lease held under its executor id (several processes may deliver; each row is
claimed by one at a time, and a claim looks at each session's oldest pending
row only, so sessions are served side by side), records each post it makes
(``done``; updates apply only while the claimer still holds the row),
retries with backoff on that session's row, and marks a row ``failed`` with
a ``channel.delivery_failed`` event when retrying cannot help. This module
knows nothing of any channel's API: the channels turn rows into posts.
Sessions know nothing of this module: :class:`~.hub.ChannelHub` registers
:func:`queue_outcome` as a turn-end listener.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnkit._values import cut_utf8, dumps, now, storable
from turnkit.messages import Message, ToolResultBlock, ToolUseBlock, thaw
from turnkit.sessions.db import schema as t
from turnkit.sessions.db.store import Store, TurnEnded, Tx
from turnkit.sessions.db.turns import MAX_ERROR_BYTES
from turnkit.sessions.model.events import ChannelDeliveryFailed

__all__ = [
    "MAX_ACTION_TEXT",
    "OutboxItem",
    "claim_due",
    "link_of",
    "link_session",
    "queue_notice",
    "queue_outcome",
    "record_failure",
    "record_progress",
    "release",
    "retry_later",
]

MAX_ACTION_TEXT = 2000  # characters of a tool call's arguments or result shown in a channel


@dataclass(frozen=True, slots=True)
class OutboxItem:
    """One claimed outbox row, with its session's channel address."""

    id: int
    session_id: str
    turn_id: str | None
    provider: str
    kind: str  # "outcome" (a turn's end) | "notice" (a post of the channel's own)
    content: dict[str, Any]
    address: dict[str, Any]
    done: int  # posts of this row already made
    attempts: int
    owner: str  # the lease owner that claimed it: its updates apply while it holds the row


# -- links ------------------------------------------------------------------


def link_session(store: Store, session_id: str, provider: str, address: dict[str, Any]) -> dict:
    """Link ``session_id`` to a channel conversation; the address in force.

    The first link wins and is never changed (a later call gets it back):
    what a session learned when it started stays as it was.
    """
    found = link_of(store, session_id)
    if found is not None:
        return found[1]
    try:
        with store.write() as tx:
            tx.execute(
                t.channel_links.insert().values(
                    session_id=session_id,
                    provider=provider,
                    address=dumps(address),
                    created_at=now(),
                )
            )
    except sa.exc.IntegrityError:  # another delivery linked it first: theirs stands
        found = link_of(store, session_id)
        if found is None:
            raise
        return found[1]
    return address


def link_of(store: Store, session_id: str) -> tuple[str, dict[str, Any]] | None:
    """The session's channel and address, or None when it has no channel."""
    with store.read() as conn:
        row = conn.execute(
            sa.select(t.channel_links).where(t.channel_links.c.session_id == session_id)
        ).first()
    return None if row is None else (row.provider, json.loads(row.address))


# -- writing ----------------------------------------------------------------


def queue_outcome(tx: Tx, ended: TurnEnded, wake: Callable[[], None]) -> None:
    """In the transaction that ends a turn: its reply, if the session has a channel."""
    link = tx.execute(
        sa.select(t.channel_links.c.provider).where(
            t.channel_links.c.session_id == ended.session_id
        )
    ).first()
    if link is None:
        return
    content = {
        "status": ended.status.value,
        "reason": ended.reason,
        "text": ended.output,
        "question": ended.question,
        "error": ended.error,
        "actions": _actions(tx, ended.turn_id, _held_calls(ended.question)),
    }
    _insert(tx, ended.session_id, ended.turn_id, link.provider, "outcome", content, None)
    tx.after_commit(wake)


def queue_notice(
    store: Store,
    session_id: str,
    provider: str,
    content: dict[str, Any],
    dedupe_key: str,
    turn_id: str | None = None,
    wake: Callable[[], None] | None = None,
) -> bool:
    """A post of the channel's own (an acknowledgement); False if ``dedupe_key`` was used."""
    try:
        with store.write() as tx:
            used = tx.execute(
                sa.select(t.channel_outbox.c.id).where(t.channel_outbox.c.dedupe_key == dedupe_key)
            ).first()
            if used is not None:
                return False
            _insert(tx, session_id, turn_id, provider, "notice", content, dedupe_key)
            if wake is not None:
                tx.after_commit(wake)
            return True
    except sa.exc.IntegrityError:  # Postgres: a concurrent copy inserted the key first
        return False


def _insert(
    tx: Tx,
    session_id: str,
    turn_id: str | None,
    provider: str,
    kind: str,
    content: dict[str, Any],
    dedupe_key: str | None,
) -> None:
    stamp = now()
    tx.execute(
        t.channel_outbox.insert().values(
            session_id=session_id,
            turn_id=turn_id,
            provider=provider,
            kind=kind,
            content=dumps(content),
            dedupe_key=dedupe_key,
            status="pending",
            done=0,
            attempts=0,
            next_at=stamp,
            created_at=stamp,
        )
    )


def _held_calls(question: dict[str, Any] | None) -> frozenset[str]:
    """The calls a question holds for approval: they did not run (the question shows them)."""
    return frozenset(a["call_id"] for a in (question or {}).get("approvals") or ())


def _actions(tx: Tx, turn_id: str, held: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The turn's tool calls (but ``ask`` and ``held`` ones), in order, with their results."""
    rows = tx.execute(
        sa.select(t.messages.c.message)
        .where(t.messages.c.turn_id == turn_id)
        .order_by(t.messages.c.turn_index)
    ).all()
    calls: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for row in rows:
        for block in Message.from_dict(json.loads(row.message)).content:
            if isinstance(block, ToolUseBlock) and block.name != "ask" and block.id not in held:
                call = {
                    "name": block.name,
                    "parameter": _cut(dumps(thaw(block.input))),
                    "result": None,
                }
                calls.append(call)
                by_id[block.id] = call
            elif isinstance(block, ToolResultBlock) and block.tool_use_id in by_id:
                by_id[block.tool_use_id]["result"] = _cut(_result_text(block))
                by_id[block.tool_use_id]["is_error"] = block.is_error
    return calls


def _result_text(block: ToolResultBlock) -> str:
    if isinstance(block.content, str):
        return block.content
    return " ".join(getattr(part, "text", f"[{part.type}]") for part in block.content)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_ACTION_TEXT else text[: MAX_ACTION_TEXT - 1] + "…"


# -- delivering -------------------------------------------------------------


def claim_due(
    store: Store, owner: str, lease_s: float, providers: tuple[str, ...], limit: int = 20
) -> tuple[list[OutboxItem], float | None]:
    """Claim due rows of ``providers`` for ``owner``, at most one per session (the
    oldest pending one: replies keep their order), leased for ``lease_s`` seconds.

    Only each session's oldest pending row is looked at, so a session with a
    long backlog (or one waiting out a back-off) takes one place in the look,
    never hides another session's rows. Returns the claimed rows (oldest
    first, at most ``limit``) and when the next unclaimed one comes due (UNIX
    seconds; None when nothing is pending).
    """
    stamp = now()
    c = t.channel_outbox.c
    heads = (
        sa.select(sa.func.min(c.id).label("id"))
        .where(c.status == "pending", c.provider.in_(providers))
        .group_by(c.session_id)
        .subquery()
    )
    of_heads = t.channel_outbox.join(heads, c.id == heads.c.id)
    holder_gone = sa.exists().where(
        t.executors.c.id == c.lease_owner, t.executors.c.lease_until < stamp
    )
    ready = sa.and_(
        c.next_at <= stamp,
        sa.or_(c.lease_until.is_(None), c.lease_until < stamp, holder_gone),
    )
    due_at = sa.case((c.lease_until > c.next_at, c.lease_until), else_=c.next_at)
    with store.read() as conn:
        rows = conn.execute(
            sa.select(t.channel_outbox)
            .select_from(of_heads)
            .where(ready)
            .order_by(c.id)
            .limit(limit)
        ).all()
        later = conn.execute(
            sa.select(sa.func.min(due_at)).select_from(of_heads).where(sa.not_(ready))
        ).scalar()
    claimed = [item for row in rows if (item := _claim(store, row, stamp, owner, lease_s))]
    if len(rows) >= limit:
        later = stamp  # more may be due now
    return claimed, later


def _claim(store: Store, row: Any, stamp: float, owner: str, lease_s: float) -> OutboxItem | None:
    c, e = t.channel_outbox.c, t.executors.c
    # A row leased by an executor whose own lease lapsed (it died) is free at once.
    holder_gone = sa.exists().where(e.id == c.lease_owner, e.lease_until < stamp)
    with store.write() as tx:
        taken = tx.execute(
            t.channel_outbox.update()
            .where(
                c.id == row.id,
                c.status == "pending",
                sa.or_(c.lease_until.is_(None), c.lease_until < stamp, holder_gone),
            )
            .values(lease_until=stamp + lease_s, lease_owner=owner)
        )
        if not taken.rowcount:
            return None
        address = tx.execute(
            sa.select(t.channel_links.c.address).where(
                t.channel_links.c.session_id == row.session_id
            )
        ).scalar()
    return _item(row, json.loads(address or "{}"), owner)


def _item(row: Any, address: dict[str, Any], owner: str) -> OutboxItem:
    return OutboxItem(
        row.id,
        row.session_id,
        row.turn_id,
        row.provider,
        row.kind,
        json.loads(row.content),
        address,
        row.done,
        row.attempts,
        owner,
    )


def record_progress(
    store: Store, item: OutboxItem, done: int, finished: bool, lease_s: float
) -> bool:
    """``done`` posts of the row are made; ``finished``: all of them (the row is sent).

    The lease is renewed for ``lease_s`` seconds, so a row of many posts stays
    its owner's. Applies only while ``owner`` holds the row: False when it no
    longer does (the lease lapsed and another process took it), and the
    caller must post nothing more of it.
    """
    values: dict[str, Any] = {"done": done, "lease_until": now() + lease_s}
    if finished:
        values.update(status="sent", lease_until=None, lease_owner=None, last_error=None)
    with store.write() as tx:
        applied = tx.execute(_still_held(item).values(values))
    return bool(applied.rowcount)


def _still_held(item: OutboxItem) -> Any:
    """An UPDATE of the row that applies only while ``item.owner`` still holds it."""
    c = t.channel_outbox.c
    return t.channel_outbox.update().where(
        c.id == item.id, c.lease_owner == item.owner, c.status == "pending"
    )


def release(store: Store, owner: str) -> None:
    """Free at once every pending row ``owner`` holds.

    A delivery task calls it when it stops (its rows are free for the next
    start) and when it starts: leases held under its own executor id are
    those of an earlier run of this process that was killed mid-post
    (two live processes never share an executor id), so they are taken back
    at once instead of lapsing. Leases of other owners lapse on their own.
    """
    c = t.channel_outbox.c
    with store.write() as tx:
        tx.execute(
            t.channel_outbox.update()
            .where(c.lease_owner == owner, c.status == "pending")
            .values(lease_until=None, lease_owner=None)
        )


def retry_later(store: Store, item: OutboxItem, delay_s: float, error: str) -> None:
    """A failure that retrying can fix: this conversation tries again after ``delay_s``
    seconds (its later rows wait behind this one; other conversations do not)."""
    error = _storable_error(error)
    with store.write() as tx:
        tx.execute(
            _still_held(item).values(
                attempts=item.attempts + 1,
                next_at=now() + delay_s,
                lease_until=None,
                lease_owner=None,
                last_error=error,
            )
        )


def record_failure(store: Store, item: OutboxItem, error: str) -> None:
    """Give the row up, with a ``channel.delivery_failed`` event in the session's log."""
    error = _storable_error(error)
    with store.write() as tx:
        given_up = tx.execute(
            _still_held(item).values(
                status="failed",
                attempts=item.attempts + 1,
                lease_until=None,
                lease_owner=None,
                last_error=error,
            )
        )
        if not given_up.rowcount:  # another process holds it now: its outcome stands
            return
        done = tx.execute(
            sa.select(t.channel_outbox.c.done).where(t.channel_outbox.c.id == item.id)
        ).scalar()  # posts made before it failed, this attempt's included
        failed = ChannelDeliveryFailed(item.provider, item.kind, error, item.attempts + 1, done)
        tx.emit(item.session_id, failed, item.turn_id)


def _storable_error(error: str) -> str:
    """A channel's error text as the row and the event can hold it: the channel's
    API wrote it (a U+0000, which Postgres refuses, or megabytes of it), so it is
    made storable and cut to :data:`MAX_ERROR_BYTES`, or the row could never be
    given up or retried and would be posted again each time its lease lapsed."""
    return cut_utf8(storable(error) or "", MAX_ERROR_BYTES)[0]
