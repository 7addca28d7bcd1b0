"""Postgres ``LISTEN``/``NOTIFY``: followers in any process woken within milliseconds.

A write transaction that appends events sends one ``NOTIFY`` naming the keys
it changed (sessions, and "a turn of this session ended" keys) after the
sending process's origin token; Postgres delivers it at commit, to every
process listening, the sender included, which leaves its own out (its
store woke those keys at the commit). Each process listens on
one connection of its own, in a thread, and wakes the waiters of those keys
(:meth:`Notifier.changed_elsewhere`). While that connection is up, the
:class:`~.notify.Notifier`'s poll slows to a fallback; when it drops, the
poll takes over at full speed until the listener is back.

SQLite has no such thing: there the poll (``PRAGMA data_version``) is the way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

import sqlalchemy as sa

if TYPE_CHECKING:
    from turnkit.sessions.db.engines import Databases
    from turnkit.sessions.db.store import Tx
    from turnkit.sessions.runtime.notify import Notifier

__all__ = ["CHANNEL", "Listener", "publisher", "start_listening"]

CHANNEL = "turnkit_changes"
MAX_PAYLOAD = 7900  # Postgres refuses payloads of 8000 bytes and more
EVERYTHING = "*"
FALLBACK_POLL_S = 1.0  # the poll, while LISTEN works
RECONNECT_S = 1.0

log = logging.getLogger("turnkit.sessions")
_NOTIFY = sa.text("SELECT pg_notify(:channel, :payload)")


def publisher(databases: Databases, origin: str) -> Callable[[Tx], None] | None:
    """What the store calls inside a write transaction that changed sessions (Postgres);
    ``origin`` names this process in the notification."""
    if databases.sqlite:
        return None

    def publish(tx: Tx) -> None:
        keys = " ".join(sorted(tx.appended))
        if len(keys.encode()) + len(origin) + 1 > MAX_PAYLOAD:
            keys = EVERYTHING
        tx.execute(_NOTIFY, {"channel": CHANNEL, "payload": f"{origin} {keys}"})

    return publish


def parse(payload: str) -> tuple[str, set[str] | None]:
    """The origin of a notification, and the keys it names (None: any may have changed)."""
    origin, _, keys = payload.partition(" ")
    return origin, None if keys == EVERYTHING else set(keys.split())


class Listener:
    """One connection that ``LISTEN``s, in a thread, until :meth:`close`."""

    def __init__(self, dsn: str, notifier: Notifier, origin: str) -> None:
        self.dsn, self.notifier, self.origin = dsn, notifier, origin
        self._stop = threading.Event()
        self.connected = threading.Event()
        self._thread = threading.Thread(target=self._run, name="turnkit-listen", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psycopg

        while not self._stop.is_set():
            try:
                with psycopg.connect(self.dsn, autocommit=True, connect_timeout=5) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._connected(True)
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            origin, keys = parse(note.payload)
                            if origin != self.origin:
                                self.notifier.changed_elsewhere(keys)
            except psycopg.Error as err:
                if not self._stop.is_set():
                    log.warning("turnkit: LISTEN connection lost (polling meanwhile): %s", err)
            finally:
                self._connected(False)
            self._stop.wait(RECONNECT_S)

    def _connected(self, up: bool) -> None:
        if up:
            self.connected.set()
            self.notifier.poll_interval = FALLBACK_POLL_S
            self.notifier.changed_elsewhere(None)  # whatever was missed while it was down
        else:
            self.connected.clear()
            self.notifier.poll_interval = None

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def start_listening(databases: Databases, notifier: Notifier, origin: str) -> Listener | None:
    """A :class:`Listener` on a Postgres database (leaving out the notifications of
    ``origin``, this process); None on SQLite."""
    if databases.sqlite:
        return None
    url = sa.engine.make_url(databases.url).set(drivername="postgresql")
    return Listener(url.render_as_string(hide_password=False), notifier, origin)
