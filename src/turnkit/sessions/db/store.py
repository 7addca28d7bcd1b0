"""Transactions and reads: the one door to turnkit's tables.

Every state change and the events that describe it are written in one
transaction (:meth:`Store.write`), so a reader never sees one without the
other and a crash leaves neither half-written. Per-session sequence numbers
(events, inputs, turns, messages, runners) are counters on the session row,
bumped in the transaction that uses them: gapless, and in commit order. The
statement that numbers an event also stamps it, and the session's
``last_activity_at`` with it.

Session rows live here; turn transitions in :mod:`.turns`, inputs in
:mod:`.inputs`, a turn's steps and messages in :mod:`.steps`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import sqlalchemy as sa

from turnkit._values import dumps, new_id, now, when
from turnkit.errors import SessionNotFoundError, TurnNotFoundError
from turnkit.messages import Message
from turnkit.sessions.db import schema as t
from turnkit.sessions.db.engines import Databases
from turnkit.sessions.db.prepared import Prepared
from turnkit.sessions.db.records import event_record, turn_record
from turnkit.sessions.db.seen_seqs import SeenSeqs
from turnkit.sessions.db.writer_lock import WriterLock
from turnkit.sessions.model.events import TURN_END_TYPES, SessionEvent
from turnkit.sessions.model.records import Event, ForkedFrom, Question, Session, Turn
from turnkit.sessions.model.status import ACTIVE, SessionState, TurnState

__all__ = [
    "Dispatch",
    "Store",
    "TurnEndListener",
    "TurnEnded",
    "Tx",
    "by_key",
    "ended_key",
    "insert_ignoring_conflict",
    "new_session_values",
    "queued_key",
]


def ended_key(session_id: str) -> str:
    """The notification key of "a turn of this session ended"."""
    return f"{session_id}#ended"


def queued_key(session_id: str) -> str:
    """The notification key of "a turn of this session was queued"."""
    return f"{session_id}#queued"


@dataclass(frozen=True, slots=True)
class TurnEnded:
    """A turn's outcome, as listeners see it in the transaction that records it."""

    session_id: str
    agent: str
    turn_id: str
    event_id: int
    status: TurnState
    reason: str | None
    error: str | None
    result: dict[str, Any] | None  # {text, truncated} of a completed turn
    output: str | None
    question: dict[str, Any] | None


class TurnEndListener(Protocol):
    """Told of every turn's end inside the transaction that ends it.

    What it writes commits with the end or not at all (subscriptions' inputs,
    a channel's outbox row). Turns folded into an answer (``reason="held"``)
    are not outcomes and are not told.
    """

    def turn_ended(self, tx: Tx, ended: TurnEnded) -> None: ...


class Dispatch(Protocol):
    """Gives a session with queued work a runner (see :mod:`turnkit.sessions.runtime.dispatch`)."""

    def turn_queued(self, tx: Tx, session_id: str) -> None: ...


_BUMP = {
    name: Prepared(
        t.sessions.update()
        .where(t.sessions.c.id == sa.bindparam("sid"))
        .values({name: t.sessions.c[name] + 1})
        .returning(t.sessions.c[name])
    )
    for name in ("input_seq", "turn_seq", "message_seq", "runner_seq")
}
# An event's seq and time in one statement, which also makes them the session's
# last activity. The time never goes back within a session: a transaction that
# read the clock, then waited for the row lock, takes the later time it finds.
_STAMP = sa.bindparam("at", type_=sa.Float)
_NEXT_EVENT = Prepared(
    t.sessions.update()
    .where(t.sessions.c.id == sa.bindparam("sid"))
    .values(
        event_seq=t.sessions.c.event_seq + 1,
        last_activity_at=sa.case(
            (t.sessions.c.last_activity_at > _STAMP, t.sessions.c.last_activity_at),
            else_=_STAMP,
        ),
    )
    .returning(t.sessions.c.event_seq, t.sessions.c.last_activity_at)
)
_INSERT_EVENT = Prepared(t.events.insert())
_LOCK_SESSION = Prepared(
    sa.select(t.sessions).where(t.sessions.c.id == sa.bindparam("sid")).with_for_update()
)
_TURN = Prepared(sa.select(t.turns).where(t.turns.c.id == sa.bindparam("id")))


class CommittedEvent(NamedTuple):
    """One event as its transaction wrote it: the log's columns, ``data`` as JSON text
    (:func:`event_record` makes it an :class:`Event`, as it does a row read back)."""

    id: int
    seq: int
    session_id: str
    turn_id: str | None
    type: str
    timestamp: float
    data: str


class Tx:
    """One write transaction: statements, the events they cause, what runs after commit."""

    def __init__(self, conn: sa.Connection, store: Store) -> None:
        self.conn = conn
        self.store = store
        self.appended: set[str] = set()
        self.events: list[CommittedEvent] = []  # those it appended
        self.seqs: dict[str, int] = {}  # session -> the highest event seq it saw or made
        self.after: list[Callable[[], None]] = []
        self.undo: list[Callable[[], None]] = []
        self.before: list[Callable[[], None]] = []

    def before_commit(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` as this transaction's last statements, once the code
        that opened it is done (before the commit)."""
        self.before.append(callback)

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once this transaction has committed (not on rollback)."""
        if callback not in self.after:
            self.after.append(callback)

    def on_rollback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` if this transaction does not commit."""
        self.undo.append(callback)

    def execute(self, statement: Any, *args: Any) -> Any:
        """Run ``statement`` in this transaction (a :class:`Prepared` one on SQLite's cursor)."""
        if type(statement) is Prepared:
            return statement.run(self.conn, *args)
        return self.conn.execute(statement, *args)

    def bump(self, session_id: str, counter: str) -> int:
        """Add one to a counter of the session's row; the new value."""
        row = _BUMP[counter].run(self.conn, {"sid": session_id}).first()
        if row is None:
            raise SessionNotFoundError(session_id)
        return int(row[0])

    def saw(self, session_id: str, seq: int) -> None:
        """Note that the session's log stood at ``seq`` in this transaction (its locked
        row said so): see :mod:`.seen_seqs`."""
        if self.seqs.get(session_id, -1) < seq:
            self.seqs[session_id] = seq

    def emit(self, session_id: str, event: SessionEvent, turn_id: str | None = None) -> int:
        """Append ``event`` to the session's log; its id."""
        row = _NEXT_EVENT.run(self.conn, {"sid": session_id, "at": now()}).first()
        if row is None:
            raise SessionNotFoundError(session_id)
        seq = self.seqs[session_id] = int(row.event_seq)  # seqs only grow in a transaction
        values = {
            "session_id": session_id,
            "seq": seq,
            "turn_id": turn_id,
            "type": event.type,
            "timestamp": float(row.last_activity_at),
            "data": dumps(event.data()),
        }
        inserted = _INSERT_EVENT.run(self.conn, values)
        self.appended.add(session_id)
        if event.type in TURN_END_TYPES:  # waiters on a turn's end listen on this key only
            self.appended.add(ended_key(session_id))
        event_id = int(inserted.inserted_primary_key[0])
        self.events.append(
            CommittedEvent(
                event_id, seq, session_id, turn_id, event.type, values["timestamp"], values["data"]
            )
        )
        return event_id

    def lock_session(self, session_id: str) -> Any:
        """The session's row, locked until commit (``SessionNotFoundError`` if none)."""
        row = _LOCK_SESSION.run(self.conn, {"sid": session_id}).first()
        if row is None:
            raise SessionNotFoundError(session_id)
        return row


class Store:
    """turnkit's tables on one database (see :mod:`turnkit.sessions.db.schema`)."""

    def __init__(
        self,
        databases: Databases,
        dispatch: Dispatch,
        on_commit: Callable[[set[str], list[CommittedEvent]], None] | None = None,
    ) -> None:
        self.databases = databases
        self.dispatch = dispatch
        self._on_commit = on_commit
        # On SQLite one writer at a time anyway: queueing here, not in SQLite's busy
        # handler (which sleeps in steps of up to 100 ms), keeps latency low.
        self._write_lock = WriterLock() if databases.sqlite else None
        self.listeners: list[TurnEndListener] = []
        # Input while busy (db/busy.py): an agent's on_busy policy, and how a turn
        # running in this process is stopped at once (turn id, reason).
        self.on_busy: Callable[[str], str] = lambda agent: "queue"
        self.cancel_local: Callable[[str, str], object] | None = None
        # Called inside each write transaction that appended events (Postgres NOTIFY).
        self.publish: Callable[[Tx], None] | None = None
        # Called first in each write of a turn's runner: raises when this process no
        # longer holds the executor lease the runner started under (runtime/executors.py).
        self.fence: Callable[[Tx], None] = lambda tx: None
        self.live_swept_at = 0.0  # when this process last deleted old live rows (db/live.py)
        self.seen_seqs = SeenSeqs()  # each session's last event seq committed here

    @contextmanager
    def write(self, urgent: bool = False) -> Iterator[Tx]:
        """One write transaction. ``urgent``: someone waits for it (an input being
        accepted); on SQLite it goes before the writes already queued (db/writer_lock.py)."""
        tx: Tx | None = None
        lock = self._write_lock
        if lock is not None:
            lock.acquire(urgent)
        try:
            with self.databases.write.begin() as conn:
                tx = Tx(conn, self)
                yield tx
                for callback in tx.before:
                    callback()
                if tx.appended and self.publish is not None:
                    self.publish(tx)  # other processes' followers (Postgres NOTIFY)
        except BaseException:
            if lock is not None:
                lock.release()
            for undo in tx.undo if tx is not None else ():
                undo()
            raise
        if lock is not None:
            lock.release()
        if tx.seqs:
            self.seen_seqs.committed(tx.seqs)
        if tx.appended and self._on_commit is not None:
            self._on_commit(tx.appended, tx.events)
        for callback in tx.after:
            callback()

    @contextmanager
    def turn_write(self) -> Iterator[Tx]:
        """A write of a turn's runner: refused (``LeaseLost``) before anything is
        written once the runner's turns belong to another process."""
        with self.write() as tx:
            self.fence(tx)
            yield tx

    @contextmanager
    def read(self) -> Iterator[sa.Connection]:
        with self.databases.read.begin() as conn:
            yield conn

    # -- sessions ------------------------------------------------------------

    def open_session(
        self, agent: str, key: str | None, data: dict[str, Any], parent_id: str | None = None
    ) -> tuple[Session, bool]:
        """Get or create, in one transaction: the session, and whether it is new."""
        with self.write() as tx:
            return self.open_in(tx, agent, key, data, parent_id)

    def open_in(
        self, tx: Tx, agent: str, key: str | None, data: dict[str, Any], parent_id: str | None
    ) -> tuple[Session, bool]:
        """:meth:`open_session` inside ``tx`` (a new session is rolled back with it)."""
        if key is not None:
            found = tx.execute(by_key(agent, key)).first()
            if found is not None:
                return self.session_record(tx.conn, found), False
        values = new_session_values(agent, key, data, parent_id)
        if key is None:
            tx.execute(t.sessions.insert().values(**values))
        else:  # Postgres: another transaction may insert the key meanwhile
            insert = insert_ignoring_conflict(tx.conn, values)
            if tx.execute(insert).first() is None:
                return self.session_record(tx.conn, tx.execute(by_key(agent, key)).one()), False
        row = tx.execute(sa.select(t.sessions).where(t.sessions.c.id == values["id"])).one()
        return self.session_record(tx.conn, row), True

    def find_session(self, agent: str, key: str) -> Session | None:
        with self.read() as conn:
            row = conn.execute(by_key(agent, key)).first()
            return None if row is None else self.session_record(conn, row)

    def session(self, session_id: str) -> Session:
        with self.read() as conn:
            row = conn.execute(sa.select(t.sessions).where(t.sessions.c.id == session_id)).first()
            if row is None:
                raise SessionNotFoundError(session_id)
            return self.session_record(conn, row)

    def session_record(self, conn: sa.Connection, row: Any, busy: bool | None = None) -> Session:
        """The record of a session row; ``busy``: whether a turn is active, when known."""
        question = None if row.question is None else Question.from_dict(json.loads(row.question))
        if row.ended:
            status = SessionState.ENDED
        elif question is not None:
            status = SessionState.AWAITING_INPUT
        else:
            if busy is None:
                busy = (
                    conn.execute(
                        sa.select(t.turns.c.id)
                        .where(t.turns.c.session_id == row.id, t.turns.c.status.in_(ACTIVE))
                        .limit(1)
                    ).first()
                    is not None
                )
            status = SessionState.RUNNING if busy else SessionState.IDLE
        forked = None if row.forked_from is None else ForkedFrom(**json.loads(row.forked_from))
        return Session(
            row.id,
            row.agent,
            row.key,
            status.value,  # type: ignore[arg-type]
            question,
            json.loads(row.data),
            when(row.created_at),  # type: ignore[arg-type]
            row.parent_id,
            forked,
            when(row.ended_at),
            last_activity_at=when(row.last_activity_at),  # type: ignore[arg-type]
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

    # -- turns ---------------------------------------------------------------

    def turn_status(self, turn_id: str) -> tuple[TurnState, str]:
        """The turn's status and session id (cheap: for waiting)."""
        with self.read() as conn:
            row = conn.execute(
                sa.select(t.turns.c.status, t.turns.c.session_id).where(t.turns.c.id == turn_id)
            ).first()
        if row is None:
            raise TurnNotFoundError(turn_id)
        return TurnState(row.status), row.session_id

    def turn_if_ended(self, turn_id: str) -> tuple[Turn | None, str]:
        """The turn if it has ended (else None), and its session id: one read, for waiting."""
        with self.read() as conn:
            row = _TURN.run(conn, {"id": turn_id}).first()
        if row is None:
            raise TurnNotFoundError(turn_id)
        return (turn_record(row) if TurnState(row.status).is_terminal() else None), row.session_id

    def turn(self, turn_id: str) -> Turn:
        with self.read() as conn:
            row = _TURN.run(conn, {"id": turn_id}).first()
        if row is None:
            raise TurnNotFoundError(turn_id)
        return turn_record(row)

    def running_turns(self, session_id: str) -> list[str]:
        with self.read() as conn:
            rows = conn.execute(
                sa.select(t.turns.c.id).where(
                    t.turns.c.session_id == session_id, t.turns.c.status == TurnState.RUNNING
                )
            ).all()
        return [row.id for row in rows]

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

    # -- events and history --------------------------------------------------

    def events(self, session_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        return [event_record(row) for row in self.event_rows(session_id, after, limit)]

    def event_rows(self, session_id: str, after: int = 0, limit: int | None = None) -> list[Any]:
        """:meth:`events` as the log's rows (``data`` still JSON text: one read may
        serve several readers, each decoding its own)."""
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
        return rows

    def history(self, session_id: str) -> tuple[Message, ...]:
        from turnkit.sessions.db.conversation import in_order

        with self.read() as conn:
            rows = conn.execute(
                in_order(
                    sa.select(t.messages.c.message).where(t.messages.c.session_id == session_id)
                )
            ).all()
        return tuple(Message.from_dict(json.loads(row.message)) for row in rows)


def by_key(agent: str, key: str) -> Any:
    return sa.select(t.sessions).where(t.sessions.c.agent == agent, t.sessions.c.key == key)


def new_session_values(
    agent: str, key: str | None, data: dict[str, Any], parent_id: str | None
) -> dict[str, Any]:
    """A new session row's values (``forked_from`` and the rest left at None)."""
    created = now()
    return {
        "id": new_id("ses"),
        "agent": agent,
        "key": key,
        "ended": False,
        "data": dumps(data),
        "parent_id": parent_id,
        "created_at": created,
        "last_activity_at": created,
        "event_seq": 0,
        "input_seq": 0,
        "turn_seq": 0,
        "message_seq": 0,
        "runner_seq": 0,
    }


def insert_ignoring_conflict(conn: sa.Connection, values: dict[str, Any]) -> Any:
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(t.sessions).values(**values).on_conflict_do_nothing().returning(t.sessions.c.id)
