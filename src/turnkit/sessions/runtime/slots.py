"""A process's turn slots: at most ``max_running`` session runners run here at once.

Runners start in three ways, and all of them count against the one bound:
a direct start takes its slot when the runner is named (:meth:`Slots.try_take`,
never waiting: a full process leaves the runner waiting instead); a process
taking waiting runners takes the slots first (:meth:`Slots.take_up_to`); a
runner DBOS recovers here waits for one (:meth:`Slots.take`). A slot that goes
back to the pool calls :attr:`Slots.on_free` (the dispatcher then looks for
waiting runners). A turn that waits for a sub-agent's turn lends its slot
meanwhile (:meth:`Slots.lent`), so parents that fill every slot cannot keep
their children from running.

Runners run on more than one event loop (this process's turn loop and
DBOS's), so the count is guarded by a thread lock and a waiter is woken on
its own loop. A freed slot goes to the longest waiter.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable

__all__ = ["Slots"]


class Slots:
    """``size`` slots, shared by the runners of every loop in this process."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._used = 0
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        self.on_free: Callable[[], object] = lambda: None

    @property
    def used(self) -> int:
        with self._lock:
            return self._used

    def free(self) -> bool:
        """Whether a slot could be taken now without waiting."""
        with self._lock:
            return self._used < self.size and not self._waiters

    def waited_for(self) -> bool:
        """Whether a runner waits for a slot."""
        with self._lock:
            return bool(self._waiters)

    def try_take(self) -> bool:
        """Take a slot if one is free (nobody waiting for it first)."""
        with self._lock:
            if self._used >= self.size or self._waiters:
                return False
            self._used += 1
            return True

    def take_up_to(self, most: int) -> int:
        """Take up to ``most`` free slots at once (none while anyone waits); how many."""
        with self._lock:
            if self._waiters:
                return 0
            taken = max(0, min(most, self.size - self._used))
            self._used += taken
            return taken

    async def take(self) -> None:
        """Take a slot, waiting for one to be given back."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._used < self.size and not self._waiters:
                self._used += 1
                return
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, future))
        try:
            await future  # the slot was handed over by give()
        except asyncio.CancelledError:
            with self._lock:
                waiting = (loop, future) in self._waiters
                if waiting:
                    self._waiters.remove((loop, future))
            if not waiting and future.done() and not future.cancelled():
                self.give()  # handed over as we were cancelled: pass it on
            raise

    def give(self) -> None:
        """Give a slot back: to the longest waiter, else to the pool."""
        while True:
            with self._lock:
                if not self._waiters:
                    self._used -= 1
                    break
                loop, future = self._waiters.popleft()
            try:
                loop.call_soon_threadsafe(self._hand_over, future)
                return
            except RuntimeError:  # its loop is closed: the next waiter
                continue
        self.on_free()

    def _hand_over(self, future: asyncio.Future[None]) -> None:
        if future.cancelled():  # gave up waiting after it was picked
            self.give()
        else:
            future.set_result(None)

    @contextlib.asynccontextmanager
    async def lent(self) -> AsyncIterator[None]:
        """Give the caller's slot to others for the block; take one back after it."""
        self.give()
        try:
            yield
        finally:
            try:
                await self.take()
            except asyncio.CancelledError:  # still the caller's to give back when it ends
                with self._lock:
                    self._used += 1
                raise
