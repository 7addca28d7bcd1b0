"""Runners that keep their idle session a moment, for its next input.

A runner whose turn ends with nothing queued may keep its session (and its
slot) for :data:`RUNNER_LINGER_S` instead of giving it up: the next turn of a
conversation then costs no new workflow. While it lingers, three things can
happen, decided under one lock so that exactly one of them does:

- the transaction that queues the session's next turn, in this process,
  *hands* that turn to the runner: its last statements claim it for the
  runner (in a savepoint, after the input's own writes and event;
  :meth:`Lingerers.hand_over`), and the runner gets the claim when it
  commits, with no write and no thread hop of its own;
- it is woken by the session's queued-turn key (an input from another
  process, or a hand-over declined) and claims the turn itself;
- a runner that waits for a slot *evicts* it (:meth:`Lingerers.evict_one`):
  it gives the session up at once.

Otherwise it gives the session up when the moment has passed. A lingerer is
registered by the transaction of its turn's end that keeps the session
(:meth:`Lingerers.keep`; undone if that rolls back), so that a hand-over or
an eviction that comes before it starts waiting is not missed.

A crash after a hand-over's commit loses nothing: the turn is running under
the runner's workflow, which DBOS resumes, and the runner's claim resumes it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from turnkit.sessions.db.steps import Claim, Journal
from turnkit.sessions.db.store import Tx, queued_key

if TYPE_CHECKING:
    from turnkit.sessions.runtime.notify import Notifier, Watch

__all__ = ["RUNNER_LINGER_S", "Lingerers"]

# A runner whose session has nothing queued waits this long for the next input
# before it gives the session up: a conversation's next turn then costs no new
# workflow (two writes fewer). It keeps its slot meanwhile, so it gives the
# session up at once when a runner waits for a slot (Lingerers.evict_one).
RUNNER_LINGER_S = 0.1

log = logging.getLogger("turnkit.sessions")

_WAITING, _CLAIMING, _HANDED = "waiting", "claiming", "handed"

ClaimFn = Callable[[bool], Awaitable[Claim | None]]  # keep -> the runner's next claim


class _Lingerer:
    __slots__ = ("evicted", "handed", "session_id", "state")

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.state = _WAITING
        self.evicted = False
        self.handed: concurrent.futures.Future[Claim | None] = concurrent.futures.Future()


class Lingerers:
    """The runners lingering in this process, by runner id."""

    def __init__(
        self, journal: Journal, notifier: Notifier | None, may_linger: Callable[[], bool]
    ) -> None:
        self._journal = journal
        self._notifier = notifier
        self._may_linger = may_linger  # whether no runner here waits for a slot
        self._lock = threading.Lock()
        self._by_runner: dict[str, _Lingerer] = {}

    def keep(self, tx: Tx, runner_id: str, session_id: str) -> bool:
        """In the transaction of a turn's end that found nothing queued: does the
        runner keep its session? (The journal asks, as ``Journal.keep_sessions``.)"""
        if RUNNER_LINGER_S <= 0 or self._notifier is None or not self._may_linger():
            return False
        with self._lock:
            self._by_runner[runner_id] = _Lingerer(session_id)
        tx.on_rollback(lambda: self.forget(runner_id))
        return True

    def kept(self, runner_id: str) -> bool:
        with self._lock:
            return runner_id in self._by_runner

    def forget(self, runner_id: str) -> None:
        with self._lock:
            self._by_runner.pop(runner_id, None)

    async def linger(
        self, runner_id: str, queued: Watch, seen: object, claim: ClaimFn
    ) -> Claim | None:
        """Wait a moment for the session's next turn: it, or None once given up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RUNNER_LINGER_S
        with self._lock:
            me = self._by_runner.get(runner_id)
        try:
            while me is not None:
                if queued.version() == seen and not me.evicted and me.state == _WAITING:
                    left = deadline - loop.time()
                    if left > 0:
                        await queued.wait(seen, left)  # type: ignore[arg-type]
                with self._lock:
                    if me.state != _HANDED:
                        if me.evicted or queued.version() == seen:
                            self._by_runner.pop(runner_id, None)  # no hand-over from here on
                            break
                        me.state = _CLAIMING
                if me.state == _HANDED:
                    handed = await asyncio.wrap_future(me.handed)
                    if handed is not None:
                        return handed
                    with self._lock:  # the hand-over was undone: claim as if woken
                        me.state, me.handed = _CLAIMING, concurrent.futures.Future()
                seen = queued.version()
                found = await claim(True)
                if found is not None:
                    return found
                with self._lock:
                    me.state = _WAITING
        finally:
            self.forget(runner_id)
        return await claim(False)

    def hand_over(self, tx: Tx, session_id: str, runner_id: str) -> bool:
        """In the transaction that queued a turn of ``session_id``: claim it for its
        runner if that lingers here (see the module's docstring); whether it did."""
        with self._lock:
            me = self._by_runner.get(runner_id)
            if me is None or me.evicted or me.state != _WAITING:
                return False
            me.state = _HANDED
            handed = me.handed
        claimed: Claim | None = None
        try:
            with tx.conn.begin_nested():
                claimed = self._journal.claim_in(tx, session_id, runner_id)
        except Exception:
            self._journal.conversations.forget(session_id)  # it may have read the undone rows
            log.exception("turnkit: handing a turn of %s to its runner failed", session_id)
        if claimed is None:
            handed.set_result(None)  # the runner claims for itself
            return False
        tx.after_commit(lambda: handed.set_result(claimed))
        tx.on_rollback(lambda: handed.set_result(None))
        return True

    def evict_one(self) -> bool:
        """Ask one lingering runner to give its session (and slot) up now, for a runner
        waiting for a slot (from any thread); whether one was asked."""
        with self._lock:
            found = next(
                (
                    (runner_id, me)
                    for runner_id, me in self._by_runner.items()
                    if not me.evicted and me.state != _HANDED
                ),
                None,
            )
            if found is None:
                return False
            found[1].evicted = True
        assert self._notifier is not None  # only a runner with a notifier lingers
        self._notifier.notify({queued_key(found[1].session_id)})  # wakes its wait
        return True
