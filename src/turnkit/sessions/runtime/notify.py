"""Wake-ups for ``wait`` and ``follow``: no sleeping poll where a notification will do.

Waiting is per session: ``with notifier.watching(key) as watch`` keeps that
key's change counter while someone follows it, and drops it when the last
follower leaves, so the state held is bounded by the sessions being
followed, not by every session ever seen.

Writes made by this process notify their keys at once (the store calls
:meth:`Notifier.committed` after each commit). Writes made by another
process on the same database are seen by a watcher thread, which runs only
while someone waits or listens: a cheap change token (on SQLite ``PRAGMA
data_version``, on Postgres the newest event id and the count of running
turns asked to stop), and when it moves and someone waits, the sessions
whose events are new and the types of those events (:class:`ChangeFeed`):
a commit wakes the followers of the sessions it changed, not every follower
of every session, and only the keys its events concern (a turn's end, a
turn queued). The token also moves on this process's own commits (another
connection); the feed leaves out the events this process appended, which
woke their waiters already.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator

import sqlalchemy as sa

from turnkit.sessions.db.store import CommittedEvent
from turnkit.sessions.runtime.recent_events import RecentEvents

__all__ = ["ChangeFeed", "Notifier", "Watch"]

WATCH_INTERVAL_S = 0.05
GAP_WAIT_S = 10.0  # how long an event id skipped by a concurrent commit is looked for
MAX_GAPS = 1000
MAX_LOCAL = 100_000  # own event ids kept for the feed to leave out


class _Key:
    __slots__ = ("refs", "version", "waiters")

    def __init__(self) -> None:
        self.refs = 0
        self.version = 0
        self.waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()


class Watch:
    """One follower's hold on a key: its version, and a wait for it to change."""

    __slots__ = ("_key", "_notifier", "key")

    def __init__(self, notifier: Notifier, key: str, state: _Key) -> None:
        self._notifier, self.key, self._key = notifier, key, state

    def version(self) -> tuple[int, int]:
        """A token that changes whenever the key may have changed."""
        return self._notifier._all, self._key.version

    async def wait(self, seen: tuple[int, int], timeout: float | None) -> None:
        """Return once :meth:`version` differs from ``seen``, or after ``timeout`` s."""
        notifier, state = self._notifier, self._key
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with notifier._lock:
            if self.version() != seen:
                return
            state.waiters.add(entry)
        notifier._ensure_watcher()
        try:  # asyncio.timeout, not wait_for: on 3.11 a cancel that comes with the
            async with asyncio.timeout(timeout):  # wake-up is lost in wait_for
                await event.wait()
        except TimeoutError:
            pass
        finally:
            with notifier._lock:
                state.waiters.discard(entry)


class ChangeFeed:
    """What other connections committed: a cheap token, and the sessions with new events.

    Event ids come from one sequence, so "new" is "above the last id seen".
    On Postgres two transactions may commit out of id order; an id skipped
    that way is looked for again for :data:`GAP_WAIT_S` (a rolled-back
    insert leaves a gap that never fills).
    """

    def __init__(self, engine: sa.Engine, token: Callable[[], object], sqlite: bool) -> None:
        from turnkit.sessions.db import schema as t

        self._engine, self.token, self._sqlite = engine, token, sqlite
        self._events = t.events
        self._last = self._max_id()
        self._gaps: dict[int, float] = {}
        self._local: set[int] = set()  # ids of events this process appended, not yet read

    def _max_id(self) -> int:
        with self._engine.connect() as conn:
            return conn.execute(sa.select(sa.func.max(self._events.c.id))).scalar() or 0

    @property
    def pending(self) -> bool:
        """Whether skipped ids are still looked for (the token cannot show them)."""
        return bool(self._gaps)

    def skip(self) -> dict[str, set[str]]:
        """Nobody follows any session: take what was committed as seen."""
        self._last, self._gaps = self._max_id(), {}
        self._local.clear()
        return {}

    def appended_here(self, event_ids: list[int]) -> None:
        """This process appended these events (and woke their waiters itself)."""
        if len(self._local) > MAX_LOCAL:  # ids never read (nobody followed): forget them
            self._local.clear()
        self._local.update(event_ids)

    def sessions(self) -> dict[str, set[str]]:
        """The sessions other processes appended events to since the last call, and
        the types of those events."""
        events = self._events
        newer = events.c.id > self._last
        if self._gaps:
            newer = sa.or_(newer, events.c.id.in_(list(self._gaps)))
        query = sa.select(events.c.id, events.c.session_id, events.c.type).where(newer)
        with self._engine.connect() as conn:
            rows = conn.execute(query).all()
        if not rows:
            return {}
        found = {row.id for row in rows}
        for event_id in found:
            self._gaps.pop(event_id, None)
        top = max(found)
        if not self._sqlite and top > self._last:
            seen_at = time.monotonic()
            for event_id in range(self._last + 1, min(top, self._last + MAX_GAPS + 1)):
                if event_id not in found:
                    self._gaps[event_id] = seen_at
        self._last = max(self._last, top)
        cutoff = time.monotonic() - GAP_WAIT_S
        self._gaps = {i: at for i, at in list(self._gaps.items())[-MAX_GAPS:] if at > cutoff}
        changed: dict[str, set[str]] = {}
        for row in rows:
            if row.id in self._local:
                self._local.discard(row.id)
            else:
                changed.setdefault(row.session_id, set()).add(row.type)
        return changed


class Notifier:
    """Change counters per followed key that waiters on any event loop can await."""

    def __init__(
        self,
        feed: ChangeFeed | None = None,
        keys_of: Callable[[str, set[str]], tuple[str, ...]] = lambda session, types: (session,),
    ) -> None:
        self._lock = threading.Lock()
        self._keys: dict[str, _Key] = {}  # followed keys only
        self._feed = feed
        self._keys_of = keys_of  # the keys a session's new events (of these types) wake
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        self._listeners: list[Callable[[], None]] = []
        self._all = 0  # bumped by changes whose sessions are unknown
        self.recent = RecentEvents()  # this process's latest events of followed sessions
        # Seconds between polls of the feed; None: WATCH_INTERVAL_S. Slower while
        # Postgres LISTEN/NOTIFY brings other processes' changes (runtime/listen.py).
        self.poll_interval: float | None = None

    @contextlib.contextmanager
    def watching(self, key: str) -> Iterator[Watch]:
        """Follow ``key`` for the block: changes to it bump its version."""
        with self._lock:
            state = self._keys.get(key)
            if state is None:
                state = self._keys[key] = _Key()
            state.refs += 1
        try:
            yield Watch(self, key, state)
        finally:
            with self._lock:
                state.refs -= 1
                if state.refs == 0 and self._keys.get(key) is state:
                    del self._keys[key]

    @property
    def followed(self) -> int:
        """How many keys someone follows now (the state this notifier holds)."""
        return len(self._keys)

    def committed(self, keys: set[str], events: list[CommittedEvent]) -> None:
        """After a commit of this process: keep its events for this process's
        followers, then wake the keys it changed."""
        if events:
            self.recent.committed(events)
            if self._feed is not None:
                self._feed.appended_here([event.id for event in events])
        self.notify(keys)

    def notify(self, keys: set[str] | None = None) -> None:
        """These keys changed (None: any may have): wake their waiters."""
        woken = []
        with self._lock:
            if keys is None:
                self._all += 1
                for state in self._keys.values():
                    woken.extend(state.waiters)
                    state.waiters.clear()
            else:
                for key in keys:
                    state = self._keys.get(key)
                    if state is None:
                        continue  # nobody follows it: nothing to keep
                    state.version += 1
                    woken.extend(state.waiters)
                    state.waiters.clear()
        for loop, event in woken:
            with contextlib.suppress(RuntimeError):  # a closed loop: its waiter is gone
                loop.call_soon_threadsafe(event.set)

    def changed_elsewhere(self, keys: set[str] | None) -> None:
        """Another process committed changes to ``keys`` (None: to any): wake their
        waiters, and call the :meth:`on_change` listeners."""
        with self._lock:
            keys = None if keys is None else {key for key in keys if key in self._keys}
        if keys is None or keys:
            self.notify(keys)
        for listener in list(self._listeners):
            listener()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (from the watcher thread) after changes by other connections."""
        self._listeners.append(listener)
        self._ensure_watcher()

    def _ensure_watcher(self) -> None:
        if self._feed is None or self._stop.is_set():
            return
        with self._lock:
            if self._watcher is not None and self._watcher.is_alive():
                return
            self._watcher = threading.Thread(target=self._watch, name="turnkit-watch", daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        feed = self._feed
        assert feed is not None
        last = feed.token()
        while not self._stop.wait(self.poll_interval or WATCH_INTERVAL_S):
            with self._lock:
                following = bool(self._keys)
                if not following and not self._listeners:
                    self._watcher = None
                    return
            try:
                seen = feed.token()
                if seen == last and not feed.pending:
                    continue
                last = seen
                changed = feed.sessions() if following else feed.skip()
            except sa.exc.SQLAlchemyError:
                continue
            if changed:
                keys = {key for s, types in changed.items() for key in self._keys_of(s, types)}
                self.notify(keys)
            for listener in list(self._listeners):
                listener()

    def close(self) -> None:
        self._stop.set()
        watcher = self._watcher
        if watcher is not None:
            watcher.join(timeout=2)
        self.notify(None)


def sqlite_token(engine: sa.Engine) -> Callable[[], object]:
    """``PRAGMA data_version`` on one held connection: changes on others' commits."""
    conn = engine.raw_connection()

    def token() -> object:
        cursor = conn.cursor()
        try:
            cursor.execute("PRAGMA data_version")
            return cursor.fetchone()[0]
        finally:
            cursor.close()

    return token


def postgres_token(engine: sa.Engine) -> Callable[[], object]:
    """The newest event id and the running turns asked to stop, in one query."""
    from turnkit.sessions.db import schema as t

    asked = (
        sa.select(sa.func.count())
        .select_from(t.turns)
        .where(t.turns.c.status == "running", t.turns.c.cancel_reason.is_not(None))
        .scalar_subquery()
    )
    query = sa.select(sa.func.max(t.events.c.id), asked)

    def token() -> object:
        with engine.connect() as conn:
            return tuple(conn.execute(query).one())

    return token


def change_feed(engine: sa.Engine, sqlite: bool) -> ChangeFeed:
    token = sqlite_token(engine) if sqlite else postgres_token(engine)
    return ChangeFeed(engine, token, sqlite)
