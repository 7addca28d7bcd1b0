"""The one-writer lock of a SQLite database, with a lane for writes people wait on.

SQLite takes one write transaction at a time, so this process queues its
writers here (not in SQLite's busy handler). Under load most writes are a
turn's own (its steps, its end) and a few are inputs that someone is waiting
to see accepted (``send``, a webhook's answer, a chat request). An urgent
writer goes before the writers that are already waiting: an input is not
accepted a whole queue of other turns' writes later, and a runner lingering
for the session's next turn is still there to take it. Urgent writers cannot
starve the rest: after :data:`URGENT_RUN` urgent grants in a row while others
wait, one of the others goes next.
"""

from __future__ import annotations

import threading

__all__ = ["URGENT_RUN", "WriterLock"]

URGENT_RUN = 4


class WriterLock:
    """A mutex whose :meth:`acquire` takes ``urgent``: urgent waiters go first."""

    __slots__ = ("_held", "_mutex", "_normal", "_run", "_urgent", "_waiting")

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._urgent = threading.Condition(self._mutex)
        self._normal = threading.Condition(self._mutex)
        self._held = False
        self._waiting = [0, 0]  # normal, urgent writers waiting
        self._run = 0  # urgent grants in a row while other writers waited

    def acquire(self, urgent: bool = False) -> None:
        with self._mutex:
            lane = 1 if urgent else 0
            if self._held or self._waiting[1] or (self._waiting[0] and not urgent):
                self._waiting[lane] += 1
                condition = self._urgent if urgent else self._normal
                try:
                    while self._held or self._next_lane() != lane:
                        condition.wait()
                finally:
                    self._waiting[lane] -= 1
            self._held = True
            self._run = self._run + 1 if urgent and self._waiting[0] else 0

    def release(self) -> None:
        with self._mutex:
            self._held = False
            lane = self._next_lane()
            if lane == 1:
                self._urgent.notify()
            elif lane == 0:
                self._normal.notify()

    def _next_lane(self) -> int | None:
        """Which lane goes next: urgent, unless it has had its run while others wait."""
        normal, urgent = self._waiting
        if urgent and (self._run < URGENT_RUN or not normal):
            return 1
        return 0 if normal else (1 if urgent else None)
