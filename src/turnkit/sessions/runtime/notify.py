"""Wake-ups for ``wait`` and ``follow``: no sleeping poll where a notification will do.

Writes made by this process notify at once (the store calls
:meth:`Notifier.notify` after each commit). Writes made by another process
on the same database are seen by a watcher thread, which runs only while
someone waits: on SQLite it reads ``PRAGMA data_version`` (a counter that
changes when another connection commits, one cheap call), on Postgres the
newest event id. Waiters on any event loop or thread are woken.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable

import sqlalchemy as sa

__all__ = ["Notifier"]

WATCH_INTERVAL_S = 0.05


class Notifier:
    """A change counter that waiters on any event loop can await."""

    def __init__(self, probe: Callable[[], object] | None = None) -> None:
        self._lock = threading.Lock()
        # session id -> waiters on it: a commit wakes only those of its sessions.
        self._waiters: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}
        self._probe = probe
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        self._listeners: list[Callable[[], None]] = []
        self._all = 0  # bumped by changes whose sessions are unknown (another process)
        self._versions: dict[str, int] = {}

    def version(self, session_id: str) -> tuple[int, int]:
        """A token that changes whenever ``session_id`` may have changed."""
        return self._all, self._versions.get(session_id, 0)

    def notify(self, sessions: set[str] | None = None) -> None:
        """These sessions changed (None: any may have): wake their waiters."""
        with self._lock:
            if sessions is None:
                self._all += 1
                woken = [w for group in self._waiters.values() for w in group]
                self._waiters = {}
            else:
                woken = []
                for session_id in sessions:
                    self._versions[session_id] = self._versions.get(session_id, 0) + 1
                    woken.extend(self._waiters.pop(session_id, ()))
        for loop, event in woken:
            with contextlib.suppress(RuntimeError):  # a closed loop: its waiter is gone
                loop.call_soon_threadsafe(event.set)
        if sessions is None:  # own changes need no listener: this process made them
            for listener in list(self._listeners):
                listener()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (from the watcher thread) after changes by other processes."""
        self._listeners.append(listener)
        self._ensure_watcher()

    async def wait(self, session_id: str, seen: tuple[int, int], timeout: float | None) -> None:
        """Return once ``version(session_id)`` differs from ``seen``, or after ``timeout`` s."""
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with self._lock:
            if self.version(session_id) != seen:
                return
            self._waiters.setdefault(session_id, set()).add(entry)
        self._ensure_watcher()
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                group = self._waiters.get(session_id)
                if group is not None:
                    group.discard(entry)
                    if not group:
                        del self._waiters[session_id]

    def _ensure_watcher(self) -> None:
        if self._probe is None or self._stop.is_set():
            return
        with self._lock:
            if self._watcher is not None and self._watcher.is_alive():
                return
            self._watcher = threading.Thread(target=self._watch, name="turnkit-watch", daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        assert self._probe is not None
        last = self._probe()
        while not self._stop.wait(WATCH_INTERVAL_S):
            with self._lock:
                idle = not self._waiters and not self._listeners
            if idle:
                with self._lock:
                    self._watcher = None
                return
            try:
                seen = self._probe()
            except sa.exc.SQLAlchemyError:
                continue
            if seen != last:
                last = seen
                self.notify(None)

    def close(self) -> None:
        self._stop.set()
        watcher = self._watcher
        if watcher is not None:
            watcher.join(timeout=2)
        self.notify(None)


def sqlite_probe(engine: sa.Engine) -> Callable[[], object]:
    """``PRAGMA data_version`` on one held connection: changes on others' commits."""
    conn = engine.raw_connection()

    def probe() -> object:
        cursor = conn.cursor()
        try:
            cursor.execute("PRAGMA data_version")
            return cursor.fetchone()[0]
        finally:
            cursor.close()

    return probe


def postgres_probe(engine: sa.Engine) -> Callable[[], object]:
    """The newest event id and the running turns asked to stop, in one query."""
    from turnkit.sessions.db import schema as t

    asked = (
        sa.select(sa.func.count())
        .select_from(t.turns)
        .where(t.turns.c.status == "running", t.turns.c.cancel_reason.is_not(None))
        .scalar_subquery()
    )
    query = sa.select(sa.func.max(t.events.c.id), asked)

    def probe() -> object:
        with engine.connect() as conn:
            return tuple(conn.execute(query).one())

    return probe
