"""This process's executor lease, and taking over the turns of executors that died.

Why: DBOS (open source) recovers at launch the pending workflows of its own
executor id and nothing else; it cannot tell a dead executor from a live
one. So every process holds its executor id under a lease in
``turnkit_executors`` (:mod:`turnkit.sessions.db.executors`):

- at start, before DBOS launches: an id whose lease is still held is waited
  for (at most the holder's lease, saying so in the log); a holder that
  renews meanwhile is alive, and the start fails naming it, since two live
  processes must never run one id's workflows;
- while running, a thread renews the lease every ``lease_seconds / 3`` and,
  in a process that runs turns, claims lapsed executors in a transaction
  and hands their pending workflows to DBOS's recovery
  (:func:`recover_workflows_of`): they resume as after a crash, once;
- at stop, the lease is released: what the process leaves unfinished is
  taken over at once by a live process.

A process that stalls past its lease and comes back finds its turns taken
over. Each runner is *fenced*: it runs under the holder (``epoch``) the
process held when the runner started, and every write it makes checks, in
the same transaction, that the lease still names that holder
(:meth:`ExecutorLease.fence`). Once the id is taken, a stalled runner's next
write is refused and the runner leaves without writing anything more (DBOS
records no outcome for it either: the taker owns the workflow now). The
process holds its id again under a new holder once the takeover is done;
until then it starts no runner, so none can run unfenced under a taken id.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from contextvars import ContextVar

import sqlalchemy as sa

from turnkit.sessions.db import executors as leases
from turnkit.sessions.db.executors import Holder, LeaseLost, LeaseRow
from turnkit.sessions.db.store import Tx
from turnkit.sessions.model.executors import ExecutorInfo

__all__ = [
    "ExecutorIdInUseError",
    "ExecutorLease",
    "executor_infos",
    "new_executor_id",
    "recover_workflows_of",
    "status_of",
]

log = logging.getLogger("turnkit.sessions")

TakeOver = Callable[[list[str]], None]

# The holder a runner started under (set by ExecutorLease.admit in the runner's
# task; its writes, run in threads, see it through the copied context).
_EPOCH: ContextVar[str | None] = ContextVar("turnkit_runner_epoch", default=None)
_ADMIT_POLL_S = 0.05


class ExecutorIdInUseError(RuntimeError):
    """Another live process holds this executor id (it kept renewing its lease)."""


def new_executor_id() -> str:
    """A new id for this process: readable (host, pid) and unique (a random tail)."""
    host = socket.gethostname().split(".")[0][:32] or "host"
    return f"{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def recover_workflows_of(executor_ids: list[str]) -> int:
    """Re-enqueue the pending DBOS workflows of ``executor_ids`` (dead executors) for
    any live process to run; how many. The one use of DBOS's private recovery API:
    ``tests/sessions/test_executors.py`` fails if a DBOS upgrade changes it."""
    from dbos import DBOS

    recover = DBOS._recover_pending_workflows  # dbos 3.4: re-enqueues, idempotently
    return len(recover(executor_ids))


def executor_infos(engine: sa.Engine, running: dict[str, int]) -> list[ExecutorInfo]:
    """The executors' leases as an operator reads them, live ones first."""
    stamp, rows = leases.listed(engine)
    infos = []
    for row in rows:
        state = row.state
        if state == leases.LIVE and row.lease_until < stamp:
            state = "lapsed"
        infos.append(
            ExecutorInfo(
                row.id,
                row.host,
                row.pid,
                row.runs_turns,
                row.max_running,
                state,  # type: ignore[arg-type]
                row.started_at,
                row.renewed_at,
                row.lease_until,
                row.taken_by,
                row.taken_at,
                running.get(row.id, 0),
            )
        )
    return infos


def status_of(url: str) -> list[ExecutorInfo]:
    """The executors on the database at ``url``, read without starting an App (blocking)."""
    from turnkit.sessions.db import schema
    from turnkit.sessions.db.engines import Databases
    from turnkit.sessions.runtime.dispatch import Dispatcher

    databases = Databases(url)
    try:
        schema.migrate(databases.write)
        dispatcher = Dispatcher(databases, "status", 1.0, 1)
        dispatcher.launch(None)  # the client only
        try:
            return executor_infos(databases.write, dispatcher.running_by_executor())
        finally:
            dispatcher.shutdown()
    finally:
        databases.dispose()


class ExecutorLease:
    """Holds this process's executor id for as long as the App runs."""

    def __init__(
        self,
        engine: sa.Engine,
        executor_id: str,
        lease_seconds: float,
        runs_turns: bool,
        max_running: int,
    ) -> None:
        self.engine, self.lease_seconds = engine, lease_seconds
        self.me = Holder(
            executor_id,
            uuid.uuid4().hex,
            socket.gethostname(),
            os.getpid(),
            runs_turns,
            max_running,
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._take_over: TakeOver | None = None
        self._live = threading.Event()  # the id is held (and the holder is this one's)
        self.lost = False

    @property
    def executor_id(self) -> str:
        return self.me.executor_id

    def acquire(self) -> None:
        """Hold the id, waiting for another holder's lease to lapse (blocking)."""
        first: LeaseRow | None = None
        while True:
            held = leases.acquire(self.engine, self.me, self.lease_seconds)
            if held is None:
                if first is not None:
                    log.warning("turnkit: executor id %r taken over", self.executor_id)
                self._live.set()
                return
            if first is None:
                first = held
                log.warning(
                    "turnkit: executor id %r is held by %s (pid %d) until its lease lapses "
                    "(in at most %.1f s): waiting, since two live processes never share an id",
                    self.executor_id,
                    held.host,
                    held.pid,
                    max(0.0, held.lease_until - time.time()),
                )
            elif held.state == leases.LIVE and (
                held.holder != first.holder or held.lease_until > first.lease_until
            ):
                raise ExecutorIdInUseError(
                    f"executor id {self.executor_id!r} is held by a live process ({held.host}, "
                    f"pid {held.pid}), which renewed its lease while this one waited: give "
                    "this process another id ($TURNKIT_EXECUTOR_ID or App(executor_id=...)) "
                    "or stop that one"
                )
            self._stop.wait(min(0.25, self.lease_seconds / 10))

    def start(self, take_over: TakeOver | None) -> None:
        """Renew the lease in a thread; with ``take_over``, claim lapsed executors too."""
        self._take_over = take_over
        self._thread = threading.Thread(target=self._run, name="turnkit-lease", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing (and taking over); the lease lapses unless :meth:`release`d."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def release(self) -> None:
        """Give the id up now: what this process left unfinished is taken over at once."""
        try:
            leases.release(self.engine, self.me)
        except sa.exc.SQLAlchemyError:  # it lapses on its own
            log.warning("turnkit: releasing executor id %r failed", self.executor_id)

    # -- fencing -------------------------------------------------------------------

    @property
    def live(self) -> bool:
        """Whether this process holds its id now (it may start runners)."""
        return self._live.is_set()

    async def admit(self) -> None:
        """At a runner's start, in its task: wait while the id is not held (taken over,
        not yet held again), then run the runner under the holder of now."""
        while not self._live.is_set():
            await asyncio.sleep(_ADMIT_POLL_S)
        _EPOCH.set(self.me.holder)

    def fence(self, tx: Tx) -> None:
        """First in each write of a runner: ``LeaseLost`` if the lease no longer names
        the holder the runner started under (its turns are another process's)."""
        epoch = _EPOCH.get()
        if epoch is None:  # not a runner's write (or no lease was ever held)
            return
        if not leases.holds(tx.conn, self.executor_id, epoch):
            if epoch == self.me.holder:  # the lease this process holds now is gone
                self._lose()
            # (else a runner of an earlier holder: the id is held again since)
            raise LeaseLost(f"executor id {self.executor_id!r} was taken over")

    # -- the lease thread --------------------------------------------------------------

    def _run(self) -> None:
        interval = self.lease_seconds / 3
        while not self._stop.wait(interval):
            try:
                if self.lost:
                    self._hold_again()
                else:
                    self._renew()
                if self._take_over is not None and not self.lost:
                    self.take_over_lapsed()
            except sa.exc.SQLAlchemyError as err:
                log.warning("turnkit: renewing executor lease failed (will retry): %s", err)

    def _renew(self) -> None:
        if not leases.renew(self.engine, self.me, self.lease_seconds):
            self._lose()

    def _lose(self) -> None:
        if self.lost:
            return
        self.lost = True
        self._live.clear()
        log.error(
            "turnkit: the lease of executor id %r lapsed (this process stalled for over "
            "%.1f s) and another process took over its turns: the runners here stop at "
            "their next write, and no new one starts until the id is held again",
            self.executor_id,
            self.lease_seconds,
        )

    def _hold_again(self) -> None:
        """After a takeover of this id: hold it again, as a new holder (the runners of
        the old one stay fenced), once the taker is done with it."""
        me = dataclasses.replace(self.me, holder=uuid.uuid4().hex)
        if leases.acquire(self.engine, me, self.lease_seconds) is not None:
            return  # still being taken over: try again at the next beat
        self.me, self.lost = me, False
        self._live.set()
        log.warning("turnkit: executor id %r is held again after its takeover", self.executor_id)

    def take_over_lapsed(self) -> list[str]:
        """Claim the lapsed executors and resume their turns here or elsewhere; their ids."""
        assert self._take_over is not None
        claimed = leases.claim_lapsed(self.engine, self.me, self.lease_seconds)
        if claimed:
            self._take_over(claimed)
            for executor_id in claimed:
                leases.mark_taken(self.engine, executor_id, self.me)
        return claimed
