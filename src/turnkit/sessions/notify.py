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
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._probe = probe
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        self._listeners: list[Callable[[], None]] = []
        self.version = 0

    def notify(self, *_: object) -> None:
        """Something changed: wake every waiter."""
        with self._lock:
            self.version += 1
            waiters, self._waiters = self._waiters, set()
        for loop, event in waiters:
            with contextlib.suppress(RuntimeError):  # a closed loop: its waiter is gone
                loop.call_soon_threadsafe(event.set)
        for listener in list(self._listeners):
            listener()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` (from any thread) after each change, own or foreign."""
        self._listeners.append(listener)
        self._ensure_watcher()

    async def wait(self, seen: int, timeout: float | None) -> None:
        """Return once the version differs from ``seen``, or after ``timeout`` seconds."""
        event = asyncio.Event()
        entry = (asyncio.get_running_loop(), event)
        with self._lock:
            if self.version != seen:
                return
            self._waiters.add(entry)
        self._ensure_watcher()
        try:
            await asyncio.wait_for(event.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters.discard(entry)

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
                self.notify()

    def close(self) -> None:
        self._stop.set()
        watcher = self._watcher
        if watcher is not None:
            watcher.join(timeout=2)
        self.notify()


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
    from turnkit.sessions import schema as t

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
