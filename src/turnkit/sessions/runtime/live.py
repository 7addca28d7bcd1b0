"""Live output across processes: one hub per started App.

The hub hands the deltas of streaming model calls to this process's live
followers (:class:`Subscription`, one per ``follow(live=True)``). A turn
running here hands its deltas to this process's followers at once
(:meth:`LiveHub.hand_over`), then stores them (:mod:`turnkit.sessions.db.live`)
for followers elsewhere and later; until that write commits the hub holds
them, and :meth:`LiveHub.backlog` gives the table's and the held ones: a
follower that subscribes first and then reads the backlog misses nothing
(the table keeps a call's deltas until a while after its reply is
recorded). Deltas written by other processes arrive through a watcher
thread that runs while someone follows: on Postgres it ``LISTEN``s on
``turnkit_live``; on SQLite it polls the table by id every :data:`POLL_S`
(simplest, and bounded: one indexed query on a table that holds only the
replies being written now, and only while this process has a live
follower).

Followers are served on their own loop. Deltas for a loop other than the
caller's wait in that loop's inbox (:class:`_Inbox`), and one step of the
loop serves all its followers of them, in the order they were handed over
(:func:`_serve`): a follower waiting with nothing else to give takes them
at once (the server writes them to its stream), any other is queued and
woken. The write waits until the followers on other loops (the server's,
while turns run on their own loop thread) have been served, for at most
:data:`SERVED_WAIT_S`: the write's thread, holding the GIL, would otherwise
hold up the very loop that delivers them (it did, by 0.1 to 0.5 ms a delta).

Bounded: a follower that lets more than :data:`QUEUE_LIMIT` deltas wait is
dropped (its iterator ends with :class:`~turnkit.errors.SlowFollowerError`),
and so are a session's followers on a loop that lets as many of that
session's deltas wait in its inbox (it does not run); nothing is buffered
without limit.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa

from turnkit.sessions.db import live as db
from turnkit.sessions.db.engines import Databases
from turnkit.sessions.db.live import LiveRow
from turnkit.sessions.db.store import Store
from turnkit.sessions.model.live import LiveEvent
from turnkit.sessions.runtime.recent_events import RecentEvents
from turnkit.sessions.runtime.shared_reads import SharedReads

__all__ = ["POLL_S", "QUEUE_LIMIT", "SERVED_WAIT_S", "Handed", "LiveHub", "Subscription"]

POLL_S = 0.02  # SQLite: how often other processes' deltas are looked for
QUEUE_LIMIT = 1000  # deltas waiting for one follower before it is dropped
SERVED_WAIT_S = 0.02  # how long storing deltas waits for this process's followers
_SEEN_LIMIT = 10_000  # streams whose last delivered index the hub remembers
log = logging.getLogger("turnkit.sessions")


class Subscription:
    """One live follower's deltas of one session, in delivery order.

    Its queue is touched only on the follower's loop: the hub serves the follower
    there (:func:`_serve`), and the follower takes from it there."""

    __slots__ = (
        "_items",
        "_loop",
        "_ready",
        "closed",
        "direct",
        "dropped",
        "hub",
        "session_id",
        "since",
    )

    def __init__(self, hub: LiveHub, session_id: str, loop: asyncio.AbstractEventLoop) -> None:
        self.hub, self.session_id = hub, session_id
        self.since = time.time()  # deltas of calls done before then are not its to give
        self.dropped = False  # too slow: its follower ends with SlowFollowerError
        self.closed = False  # the App is stopping: its follower ends
        self._items: deque[LiveRow] = deque()
        self._loop = loop
        self._ready = asyncio.Event()
        # While its follower waits with nothing else to give, it may take deltas at
        # once, on its loop, as they come: ``direct(rows)`` gives them from the first
        # and says how many it took (given, or skipped as given already); the rest
        # is queued and the follower woken for it.
        self.direct: Callable[[Sequence[LiveRow]], int] | None = None

    def take(self) -> list[LiveRow]:
        """The deltas delivered since the last take."""
        items = list(self._items)
        self._items.clear()
        self._ready.clear()
        return items

    async def wait(self) -> None:
        """Return once there is something to take (or the follower was dropped), or
        :meth:`notify` was called, since the last take."""
        await self._ready.wait()

    def notify(self) -> None:
        """Wake :meth:`wait` (on the follower's loop): its other source has news, which
        comes first, so deltas no longer go to :attr:`direct` until it waits again."""
        self.direct = None
        self._ready.set()

    def _queue(self, rows: Sequence[LiveRow]) -> None:
        """On the follower's loop: queue ``rows`` for it and wake it; past
        :data:`QUEUE_LIMIT` waiting, it is dropped instead."""
        if not self.dropped:
            items = self._items
            items.extend(rows)
            if len(items) > QUEUE_LIMIT:
                self.dropped = True
                items.clear()
        self._ready.set()


def _serve(subs: Sequence[Subscription], rows: Sequence[LiveRow]) -> None:
    """On the followers' loop: hand ``rows`` to each of ``subs``, at once to a direct
    taker that has nothing queued before them (a hundred followers are then served
    in this one step, none woken), else queued for its iterator."""
    for sub in subs:
        rest = rows
        direct = sub.direct
        if direct is not None and not sub._items and not (sub.dropped or sub.closed):
            try:
                taken = direct(rows)
            except Exception:  # its follower gives them itself (what was given is skipped)
                log.exception("turnkit: a live follower's direct delivery failed")
                taken = 0
            if taken == len(rows):
                continue
            rest = rows[taken:]
        sub._queue(rest)


class Handed(NamedTuple):
    """Deltas handed to this process's followers: those on the caller's loop have them;
    ``served`` are done once those on each other loop have them too."""

    rows: list[LiveRow]
    served: list[concurrent.futures.Future[None]]

    async def wait(self, timeout: float = SERVED_WAIT_S) -> None:
        """Until every follower here has been handed the rows (at most ``timeout``)."""
        if self.served:
            await asyncio.wait([asyncio.wrap_future(f) for f in self.served], timeout=timeout)

    def wait_blocking(self, timeout: float = SERVED_WAIT_S) -> None:
        """:meth:`wait` for a caller outside any loop (a worker thread)."""
        if self.served:
            concurrent.futures.wait(self.served, timeout=timeout)


class LiveHub:
    """This process's live followers, and the deltas it stores and receives."""

    def __init__(
        self, databases: Databases, store: Store, recent: RecentEvents | None = None
    ) -> None:
        self._databases, self._store = databases, store
        self.recent = recent  # this process's latest events, which catch-ups read first
        self._lock = threading.Lock()
        self._subs: dict[str, dict[asyncio.AbstractEventLoop, set[Subscription]]] = {}
        self._inboxes: dict[asyncio.AbstractEventLoop, _Inbox] = {}  # deltas not yet served
        self._seen: OrderedDict[str, int] = OrderedDict()  # stream -> last index delivered
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        self._listen: Any = None  # Postgres: the LISTENing connection
        self._last_id = 0  # SQLite: the last row the watcher saw
        self.reads = SharedReads()  # the catch-up reads of this process's followers
        self._held: dict[str, list[LiveRow]] = {}  # session -> handed over, not yet committed

    # -- followers ---------------------------------------------------------------

    def subscribe(self, session_id: str, loop: asyncio.AbstractEventLoop) -> Subscription:
        """Start receiving the session's deltas (blocking: it may start the watcher)."""
        sub = Subscription(self, session_id, loop)
        with self._lock:
            self._subs.setdefault(session_id, {}).setdefault(loop, set()).add(sub)
        try:
            self._ensure_watcher()
        except BaseException:
            self.unsubscribe(sub)
            raise
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            by_loop = self._subs.get(sub.session_id, {})
            subs = by_loop.get(sub._loop)
            if subs is None:
                return
            subs.discard(sub)
            if not subs:
                del by_loop[sub._loop]
                if not by_loop:
                    del self._subs[sub.session_id]
                if not any(sub._loop in found for found in self._subs.values()):
                    inbox = self._inboxes.pop(sub._loop, None)  # nobody there to serve
                    if inbox is not None:
                        inbox.served.set_result(None)

    def backlog(self, session_id: str) -> list[LiveRow]:
        """The deltas of the session's calls still streaming: stored, or handed over
        here and still being written (blocking)."""
        with self._lock:  # first: a held delta leaves only once its write committed
            held = list(self._held.get(session_id, ()))
        with self._store.read() as conn:
            rows = db.current(conn, session_id)
        stored = {(row.stream, row.event.index) for row in rows}
        return rows + [row for row in held if (row.stream, row.event.index) not in stored]

    def closing(
        self, session_id: str, turn_id: str, seqs: tuple[int, int]
    ) -> list[tuple[LiveRow, float | None]]:
        """The stored deltas of the turn's call that event ``seqs[1]`` closes, each with
        when its call was done (blocking)."""
        with self._store.read() as conn:
            return db.closing(conn, session_id, turn_id, seqs)

    @property
    def followers(self) -> int:
        with self._lock:
            return sum(len(subs) for found in self._subs.values() for subs in found.values())

    # -- deltas --------------------------------------------------------------------

    def hand_over(self, stream: str, events: Sequence[LiveEvent]) -> Handed:
        """Give one model call's new deltas to this process's followers now, and hold
        them until :meth:`store` has written them (any thread)."""
        rows = [LiveRow(0, stream, event) for event in events]  # row ids come with the write
        if not rows:
            return Handed(rows, [])
        with self._lock:
            self._held.setdefault(rows[0].event.session_id, []).extend(rows)
        return Handed(rows, self.deliver(rows))

    def store(self, step: str, rows: Sequence[LiveRow]) -> None:
        """Write deltas :meth:`hand_over` gave (blocking); then they are no longer held."""
        if not rows:
            return
        try:
            with self._store.turn_write() as tx:
                db.insert(tx, step, rows[0].stream, [row.event for row in rows])
        finally:
            session_id = rows[0].event.session_id
            with self._lock:
                held = self._held.get(session_id, [])
                written = {id(row) for row in rows}
                held[:] = [row for row in held if id(row) not in written]
                if not held:
                    self._held.pop(session_id, None)

    def publish(self, step: str, stream: str, events: Sequence[LiveEvent]) -> None:
        """Hand one model call's new deltas over, then store them (blocking)."""
        handed = self.hand_over(stream, events)
        handed.wait_blocking()
        self.store(step, handed.rows)

    def deliver(self, rows: Sequence[LiveRow]) -> list[concurrent.futures.Future[None]]:
        """Hand deltas to the followers of their sessions, each once (any thread): at
        once to those on the caller's loop; the futures are done once those on other
        loops have them (served in one step of each loop)."""
        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        now: list[tuple[tuple[Subscription, ...], list[LiveRow]]] = []
        scheduled: list[tuple[asyncio.AbstractEventLoop, _Inbox]] = []
        served: list[concurrent.futures.Future[None]] = []
        with self._lock:
            for session_id, found in self._new(rows).items():
                for loop, subs in self._subs.get(session_id, {}).items():
                    if loop is here and loop not in self._inboxes:  # else after those
                        now.append((tuple(subs), found))
                        continue
                    inbox = self._inboxes.get(loop)
                    if inbox is None:
                        inbox = self._inboxes[loop] = _Inbox()
                        scheduled.append((loop, inbox))
                    inbox.add(session_id, tuple(subs), found)
                    if inbox.served not in served:
                        served.append(inbox.served)
        for loop, inbox in scheduled:
            try:
                loop.call_soon_threadsafe(self._drain, loop)
            except RuntimeError:  # the followers' loop is closed: they are gone
                with self._lock:  # (unless an unsubscribe took the inbox meanwhile)
                    ours = self._inboxes.get(loop) is inbox
                    if ours:
                        del self._inboxes[loop]
                if ours:
                    inbox.served.set_result(None)
        for subs, found in now:
            _serve(subs, found)
        return served

    def _new(self, rows: Sequence[LiveRow]) -> dict[str, list[LiveRow]]:
        """``rows`` not handed over before, by session (under the lock)."""
        by_session: dict[str, list[LiveRow]] = {}
        seen = self._seen
        for row in rows:
            last = seen.get(row.stream, -1)
            if row.event.index <= last:
                continue  # already handed over (this process's own, read back)
            seen[row.stream] = row.event.index
            seen.move_to_end(row.stream)
            by_session.setdefault(row.event.session_id, []).append(row)
        while len(seen) > _SEEN_LIMIT:
            seen.popitem(last=False)
        return by_session

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """On ``loop``: serve what was handed over for its followers since the last time."""
        with self._lock:
            inbox = self._inboxes.pop(loop, None)
        if inbox is None:
            return
        try:
            for _, subs, found in inbox.batches:
                _serve(subs, found)
        finally:
            inbox.served.set_result(None)

    # -- the watcher ---------------------------------------------------------------

    def _ensure_watcher(self) -> None:
        with self._lock:
            if self._stop.is_set() or (self._watcher is not None and self._watcher.is_alive()):
                return
            if self._databases.sqlite:
                with self._store.read() as conn:  # before the follower reads the table
                    self._last_id = db.last_id(conn)
                target = self._poll
            else:
                self._listen = _listening(self._databases.url)
                target = self._receive
            self._watcher = threading.Thread(target=target, name="turnkit-live", daemon=True)
            self._watcher.start()

    def _idle(self) -> bool:
        """Whether nobody follows: the watcher then stops (the next follower restarts it)."""
        with self._lock:
            if self._subs:
                return False
            self._watcher = None
            return True

    def _poll(self) -> None:
        while not self._stop.wait(POLL_S):
            if self._idle():
                return
            try:
                with self._store.read() as conn:
                    rows = db.newer(conn, self._last_id)
            except sa.exc.SQLAlchemyError:
                continue
            if rows:
                self._last_id = rows[-1].id
                self.deliver(rows)

    def _receive(self) -> None:
        conn = self._listen
        try:
            while not self._stop.is_set():
                for note in conn.notifies(timeout=0.25):
                    rows, ids = db.decode_notify(note.payload)
                    if ids:
                        with self._store.read() as read:
                            rows += db.by_ids(read, ids)
                    self.deliver(rows)
                if self._idle():
                    return
        except Exception:  # the connection broke: the next follower opens another
            if not self._stop.is_set():
                log.warning("turnkit: the live-output listener stopped", exc_info=True)
            self._idle()
        finally:
            with contextlib.suppress(Exception):
                conn.close()

    def close(self) -> None:
        self._stop.set()
        watcher = self._watcher
        if watcher is not None:
            watcher.join(timeout=2)
        with self._lock:
            by_loop: dict[asyncio.AbstractEventLoop, list[Subscription]] = {}
            for found in self._subs.values():
                for loop, subs in found.items():
                    by_loop.setdefault(loop, []).extend(subs)
        for loop, subs in by_loop.items():  # their followers end (the App is stopping)
            for sub in subs:
                sub.closed = True
            with contextlib.suppress(RuntimeError):  # a closed loop: they are gone
                loop.call_soon_threadsafe(_wake, subs)


class _Inbox:
    """Deltas handed over for the followers on one loop, until that loop serves them
    (:meth:`LiveHub._drain`): one wake-up of the loop however many come meanwhile.
    Bounded as a follower is: once :data:`QUEUE_LIMIT` deltas of one session wait
    here, the loop is not running, and that session's followers on it are dropped
    (those of other sessions keep their own count)."""

    __slots__ = ("batches", "counts", "served")

    def __init__(self) -> None:
        self.batches: list[tuple[str, tuple[Subscription, ...], Sequence[LiveRow]]] = []
        self.counts: dict[str, int] = {}  # session -> deltas waiting here
        self.served: concurrent.futures.Future[None] = concurrent.futures.Future()

    def add(self, session_id: str, subs: tuple[Subscription, ...], rows: list[LiveRow]) -> None:
        self.batches.append((session_id, subs, rows))
        count = self.counts[session_id] = self.counts.get(session_id, 0) + len(rows)
        if count > QUEUE_LIMIT:
            batches = [batch for batch in self.batches if batch[0] != session_id]
            dropped = {sub for sid, found, _ in self.batches if sid == session_id for sub in found}
            for sub in dropped:
                sub.dropped = True
            self.batches = [*batches, (session_id, tuple(dropped), ())]  # woken to end
            self.counts[session_id] = 0


def _wake(subs: Sequence[Subscription]) -> None:
    for sub in subs:
        sub._ready.set()


def _listening(url: str) -> Any:
    """A psycopg connection that LISTENs on the live channel."""
    import psycopg

    conninfo = sa.engine.make_url(url).set(drivername="postgresql")
    conn = psycopg.connect(conninfo.render_as_string(hide_password=False), autocommit=True)
    conn.execute(f"LISTEN {db.CHANNEL}")
    return conn
