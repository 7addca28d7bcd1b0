"""The session store: sessions, inputs, turns and the event log, in SQL.

Every state change and the events that describe it are written in one
transaction (:meth:`Store.write`), so a reader never sees one without the
other and a crash leaves neither half-written. Per-session sequence numbers
(events, inputs, turns, messages) are counters on the session row, bumped in
the transaction that uses them: gapless, and in commit order.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from turnkit.errors import SessionNotFoundError, TurnNotFoundError
from turnkit.messages import Message
from turnkit.sessions import schema as t
from turnkit.sessions._db import Engines, cut_utf8, dumps, new_id, now, when
from turnkit.sessions.inputs import AgentInput
from turnkit.sessions.records import Event, Question, Receipt, Session, Turn
from turnkit.sessions.routing import accept

__all__ = ["NewInput", "Store", "Tx"]

ACTIVE = ("queued", "running")


class NewInput:
    """An input about to be stored (already checked by the caller)."""

    __slots__ = (
        "answers",
        "describe",
        "details",
        "idempotency_key",
        "payload_json",
        "source",
        "text",
    )

    def __init__(
        self,
        source: str,
        text: str | None,
        payload_json: str,
        details: dict[str, Any],
        idempotency_key: str | None = None,
        answers: str | None = None,
        describe: str | None = None,
    ) -> None:
        self.source = source
        self.text = text
        self.payload_json = payload_json
        self.details = details  # more AgentInput fields: channel, webhook, schedule, event
        self.idempotency_key = idempotency_key
        self.answers = answers
        self.describe = describe  # the text its input.received event shows, if not its own


# Built once: the hottest statements, executed with parameters only.
_BUMP = {
    name: t.sessions.update()
    .where(t.sessions.c.id == sa.bindparam("sid"))
    .values({name: t.sessions.c[name] + sa.bindparam("by")})
    .returning(t.sessions.c[name])
    for name in ("event_seq", "input_seq", "turn_seq", "message_seq")
}
_INSERT_EVENT = t.events.insert()
_TURN_STATUS = sa.select(t.turns.c.status, t.turns.c.session_id).where(
    t.turns.c.id == sa.bindparam("tid")
)


TURN_ENDS = frozenset({"turn.completed", "turn.failed", "turn.cancelled"})


def ended_key(session_id: str) -> str:
    """The notification key of "a turn of this session ended"."""
    return f"{session_id}#ended"


class Tx:
    """One write transaction: statements plus the events they cause."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.appended: set[str] = set()
        self.after: list[Callable[[], None]] = []

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once this transaction has committed (not on rollback)."""
        if callback not in self.after:
            self.after.append(callback)

    def execute(self, statement: Any, *args: Any) -> sa.CursorResult[Any]:
        return self.conn.execute(statement, *args)

    def bump(self, session_id: str, counter: str, by: int = 1) -> int:
        """Add ``by`` to one of the session's counters; the new value."""
        row = self.conn.execute(_BUMP[counter], {"sid": session_id, "by": by}).first()
        if row is None:
            raise SessionNotFoundError(session_id)
        return int(row[0])

    def emit(
        self, session_id: str, type: str, data: dict[str, Any], turn_id: str | None = None
    ) -> int:
        """Append one event to the session's log; its id."""
        seq = self.bump(session_id, "event_seq")
        values = {
            "session_id": session_id,
            "seq": seq,
            "turn_id": turn_id,
            "type": type,
            "timestamp": now(),
            "data": dumps(data),
        }
        inserted = self.conn.execute(_INSERT_EVENT, values)
        self.appended.add(session_id)
        if type in TURN_ENDS:  # waiters on a turn's end listen on this key only
            self.appended.add(ended_key(session_id))
        return int(inserted.inserted_primary_key[0])


class Store:
    """turnkit's tables on one database (see :mod:`turnkit.sessions.schema`)."""

    def __init__(
        self,
        engines: Engines,
        enqueue: Callable[[sa.Connection, str, str], None],
        on_commit: Callable[[set[str]], None] | None = None,
    ) -> None:
        self.engines = engines
        self.enqueue = enqueue  # (conn, turn id, session id): the turn's workflow, in this tx
        self._on_commit = on_commit
        self._write_lock = threading.Lock() if engines.sqlite else contextlib.nullcontext()
        self.on_reply_queued: Callable[[], None] | None = None  # wakes channel delivery

    @contextmanager
    def write(self) -> Iterator[Tx]:
        # On SQLite one writer at a time anyway: queueing here, not in SQLite's
        # busy handler (which sleeps in steps of up to 100 ms), keeps latency low.
        with self._write_lock, self.engines.write.begin() as conn:
            tx = Tx(conn)
            yield tx
        if tx.appended and self._on_commit is not None:
            self._on_commit(tx.appended)
        for callback in tx.after:
            callback()

    @contextmanager
    def read(self) -> Iterator[sa.Connection]:
        with self.engines.read.begin() as conn:
            yield conn

    # -- sessions ------------------------------------------------------------

    def create_session(
        self, agent: str, key: str | None, data: dict[str, Any], parent_id: str | None = None
    ) -> tuple[Session, bool]:
        """Get or create: the session, and whether it is new."""
        if key is not None:
            found = self._session_by_key(agent, key)
            if found is not None:
                return found, False
        session_id = new_id("ses")
        try:
            with self.write() as tx:
                tx.execute(
                    t.sessions.insert().values(
                        id=session_id,
                        agent=agent,
                        key=key,
                        ended=False,
                        data=dumps(data),
                        parent_id=parent_id,
                        created_at=now(),
                        event_seq=0,
                        input_seq=0,
                        turn_seq=0,
                        message_seq=0,
                    )
                )
        except sa.exc.IntegrityError:
            found = self._session_by_key(agent, key) if key is not None else None
            if found is None:
                raise
            return found, False
        return self.session(session_id), True

    def _session_by_key(self, agent: str, key: str) -> Session | None:
        with self.read() as conn:
            row = conn.execute(
                sa.select(t.sessions).where(t.sessions.c.agent == agent, t.sessions.c.key == key)
            ).first()
            return None if row is None else self._session(conn, row)

    def session(self, session_id: str) -> Session:
        with self.read() as conn:
            row = conn.execute(sa.select(t.sessions).where(t.sessions.c.id == session_id)).first()
            if row is None:
                raise SessionNotFoundError(session_id)
            return self._session(conn, row)

    def _session(self, conn: sa.Connection, row: Any) -> Session:
        question = None if row.question is None else Question.from_dict(json.loads(row.question))
        if row.ended:
            status = "ended"
        elif question is not None:
            status = "awaiting_input"
        else:
            busy = conn.execute(
                sa.select(t.turns.c.id)
                .where(t.turns.c.session_id == row.id, t.turns.c.status.in_(ACTIVE))
                .limit(1)
            ).first()
            status = "running" if busy else "idle"
        return Session(
            row.id,
            row.agent,
            row.key,
            status,  # type: ignore[arg-type]
            question,
            json.loads(row.data),
            when(row.created_at),  # type: ignore[arg-type]
            row.parent_id,
            when(row.ended_at),
        )

    def session_agent(self, session_id: str) -> tuple[str, bool]:
        """The session's agent name and whether it has ended."""
        with self.read() as conn:
            row = conn.execute(
                sa.select(t.sessions.c.agent, t.sessions.c.ended).where(
                    t.sessions.c.id == session_id
                )
            ).first()
        if row is None:
            raise SessionNotFoundError(session_id)
        return row.agent, bool(row.ended)

    def end_session(self, session_id: str) -> list[str]:
        """Mark the session ended; cancel its queued turns. The ids of running turns."""
        with self.write() as tx:
            row = tx.execute(
                sa.select(t.sessions.c.ended).where(t.sessions.c.id == session_id)
            ).first()
            if row is None:
                raise SessionNotFoundError(session_id)
            if row.ended:
                return []
            tx.execute(
                t.sessions.update()
                .where(t.sessions.c.id == session_id)
                .values(ended=True, ended_at=now(), question=None)
            )
            active = tx.execute(
                sa.select(t.turns.c.id, t.turns.c.status)
                .where(t.turns.c.session_id == session_id, t.turns.c.status.in_(ACTIVE))
                .order_by(t.turns.c.seq)
            ).all()
            for turn_id, status in active:
                if status == "queued":
                    self.end_turn(tx, session_id, turn_id, "cancelled", reason="session_ended")
            return [turn_id for turn_id, status in active if status == "running"]

    # -- inputs --------------------------------------------------------------

    def accept_input(self, session_id: str, new: NewInput) -> Receipt:
        """Store an input and route it (see :mod:`turnkit.sessions.routing`);
        a repeated idempotency key gets its first receipt back."""
        try:
            with self.write() as tx:
                return accept(self, tx, session_id, new)
        except sa.exc.IntegrityError:
            # Another process stored the same key between our check and insert
            # (the session row lock makes this rare): that one is the first.
            if new.idempotency_key is None:
                raise
            with self.write() as tx:
                return accept(self, tx, session_id, new)

    # -- turns ---------------------------------------------------------------

    def turn_status(self, turn_id: str) -> tuple[str, str]:
        """The turn's status and session id (cheap: for waiting)."""
        with self.read() as conn:
            row = conn.execute(_TURN_STATUS, {"tid": turn_id}).first()
        if row is None:
            raise TurnNotFoundError(turn_id)
        return row.status, row.session_id

    def turn(self, turn_id: str) -> Turn:
        with self.read() as conn:
            row = conn.execute(sa.select(t.turns).where(t.turns.c.id == turn_id)).first()
        if row is None:
            raise TurnNotFoundError(turn_id)
        return turn_record(row)

    def running_turns(self, session_id: str) -> list[str]:
        with self.read() as conn:
            rows = conn.execute(
                sa.select(t.turns.c.id).where(
                    t.turns.c.session_id == session_id, t.turns.c.status == "running"
                )
            ).all()
        return [row.id for row in rows]

    def request_cancel(self, turn_id: str, reason: str) -> None:
        with self.write() as tx:
            tx.execute(
                t.turns.update()
                .where(t.turns.c.id == turn_id, t.turns.c.status == "running")
                .values(cancel_reason=reason)
            )

    def cancel_requests(self, turn_ids: Sequence[str]) -> dict[str, str]:
        """Of ``turn_ids``, the running ones asked to stop, with the reason."""
        if not turn_ids:
            return {}
        with self.read() as conn:
            rows = conn.execute(
                sa.select(t.turns.c.id, t.turns.c.cancel_reason).where(
                    t.turns.c.id.in_(turn_ids), t.turns.c.cancel_reason.is_not(None)
                )
            ).all()
        return {row.id: row.cancel_reason for row in rows}

    def end_turn(
        self,
        tx: Tx,
        session_id: str,
        turn_id: str,
        status: str,
        *,
        output: str | None = None,
        error: str | None = None,
        reason: str | None = None,
        usage: dict[str, int] | None = None,
        output_data: Any = None,
    ) -> None:
        data_json = None if output_data is None else dumps(_plain_output(output_data))
        tx.execute(
            t.turns.update()
            .where(t.turns.c.id == turn_id)
            .values(
                status=status,
                output=output,
                error=error,
                reason=reason,
                ended_at=now(),
                usage=None if usage is None else dumps(usage),
                output_data=data_json,
            )
        )
        result = None
        if status == "completed":
            text, truncated = cut_utf8(output or "", 16 * 1024)
            result = {"text": text, "truncated": truncated}
            data: dict[str, Any] = {"result": result}
            if data_json is not None:
                data["output_data"] = json.loads(data_json)
        elif status == "failed":
            data = {"reason": reason, "error": error}
        else:
            data = {"reason": reason}
        kind = f"turn.{status}"
        event_id = tx.emit(session_id, kind, data, turn_id)
        if reason != "held":  # a turn folded into a question's answer is no outcome
            # Imported here: both write through this store (a module cycle otherwise).
            from turnkit.sessions.subscriptions import fan_out

            outcome = {"type": kind, "reason": reason, "error": error, "result": result}
            fan_out(self, tx, session_id, turn_id, event_id, outcome)
            from turnkit.sessions.outbox import queue_outcome

            queue_outcome(self, tx, session_id, turn_id, outcome)

    # -- events and history --------------------------------------------------

    def events(self, session_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        with self.read() as conn:
            query = (
                sa.select(t.events)
                .where(t.events.c.session_id == session_id, t.events.c.seq > after)
                .order_by(t.events.c.seq)
            )
            if limit is not None:
                query = query.limit(limit)
            rows = conn.execute(query).all()
            if not rows:
                exists = conn.execute(
                    sa.select(t.sessions.c.id).where(t.sessions.c.id == session_id)
                ).first()
                if exists is None:
                    raise SessionNotFoundError(session_id)
        return [event_record(row) for row in rows]

    def history(self, session_id: str, conn: sa.Connection | None = None) -> tuple[Message, ...]:
        if conn is None:
            with self.read() as own:
                return self.history(session_id, own)
        rows = conn.execute(
            sa.select(t.messages.c.message)
            .where(t.messages.c.session_id == session_id)
            .order_by(t.messages.c.position)
        ).all()
        return tuple(Message.from_dict(json.loads(row.message)) for row in rows)


def _plain_output(value: Any) -> Any:
    """Structured output as JSON (a model or dataclass instance as its fields)."""
    import pydantic_core

    return json.loads(pydantic_core.to_json(value))


def turn_record(row: Any) -> Turn:
    question = None if row.question is None else Question.from_dict(json.loads(row.question))
    output_data = None if row.output_data is None else json.loads(row.output_data)
    return Turn(
        row.id,
        row.session_id,
        row.seq,
        row.status,
        AgentInput.from_dict(json.loads(row.input)),
        row.output,
        question,
        row.error,
        row.reason,
        when(row.started_at),
        when(row.ended_at),
        output_data,
    )


def event_record(row: Any) -> Event:
    return Event(
        row.id,
        row.seq,
        row.session_id,
        row.turn_id,
        row.type,
        when(row.timestamp),  # type: ignore[arg-type]
        json.loads(row.data),  # plain JSON, decoded anew for every reader
    )
