"""DBOS for sessions: one durable runner workflow per busy session, started at once.

A session's turns run one at a time in its *runner*, a DBOS workflow that
claims the session's next queued turn until none is left (see the lifecycle
in :mod:`turnkit.sessions.db.turns`). The :class:`Dispatcher` names a runner
in the transaction that queues a turn for a session without one, then:

- starts it directly after the commit when this process runs turns and has
  a free slot: no queue poll stands between an input and its turn;
- else, in that same transaction, leaves it waiting in turnkit's own table
  (:mod:`turnkit.sessions.db.waiting`) for whichever process has a free slot
  (this one when a slot frees, woken at once; any other that runs turns,
  which looks every ``polling_interval``). A process that takes a waiting
  runner starts it directly, as if it had named it.

So no DBOS queue is polled: asking whether anything waits is a one-row read,
and only a process with a free slot asks. (Earlier versions put waiting
runners on a partitioned DBOS queue whose poll cost every process a
transaction every 20 ms; a database left with runners on it is drained by
DBOS before the queue is retired.)

Every runner that runs here holds one of the process's ``max_running``
slots (:mod:`.slots`), however it started: a direct start takes its slot
when the runner is named or taken, one recovered by DBOS waits for one, so
a process never runs more than ``max_running`` turns at once.

A process that lost its executor lease (it stalled and its turns were
taken over) starts nothing directly and takes no waiting runner until it
holds its id again: each runner runs under the holder of its start, and its
writes are refused once that holder is gone (:mod:`.executors`); such a
runner leaves by cancellation, so DBOS records no outcome of it.

A crash between a commit and the direct start leaves a session whose runner
DBOS has never heard of; :meth:`Dispatcher.recover` (at launch, and when a
lapsed executor is taken over) finds such sessions and starts the runner
under the same id. Runner ids are deterministic and DBOS runs one workflow
per id, so a runner started twice, from two processes or twice by one, still
runs once.

DBOS is one per process, so one App runs its engine in a process at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, ClassVar

import sqlalchemy as sa
from dbos import DBOS, DBOSClient, SetWorkflowID

from turnkit._loop_thread import LoopThread
from turnkit.sessions.db import schema as t
from turnkit.sessions.db import waiting
from turnkit.sessions.db.engines import Databases
from turnkit.sessions.db.executors import LeaseLost
from turnkit.sessions.db.store import Store, Tx
from turnkit.sessions.model.status import TurnState
from turnkit.sessions.runtime.slots import Slots

__all__ = ["APP_VERSION", "QUEUE", "WORKFLOW", "Dispatcher"]

QUEUE = "turnkit_turns"  # the DBOS queue of earlier versions (retired once drained)
WORKFLOW = "turnkit_turn"
# Fixed, so workflows are recovered across restarts of changed user code:
# a turn's progress is replayed from turnkit's own step records.
APP_VERSION = "turnkit-1"
_FINISHED = frozenset({"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})

SessionBody = Callable[[str, str], Awaitable[None]]  # (runner id, session id)

_RUNNER_OF = sa.select(t.sessions.c.runner).where(t.sessions.c.id == sa.bindparam("sid"))
_NAME_RUNNER = (
    t.sessions.update()
    .where(t.sessions.c.id == sa.bindparam("sid"))
    .values(runner=sa.bindparam("runner_id"))
)

# After asking a lingering runner to make room, the taker looks again this soon
# (its freed slot wakes the taker at once; this covers a runner that took a turn
# of its own session meanwhile and so frees nothing).
_EVICTED_LOOK_S = 0.05

_lock = threading.Lock()
_body: SessionBody | None = None
log = logging.getLogger("turnkit.sessions")


@DBOS.workflow(name=WORKFLOW)
async def _runner_workflow(session_id: str) -> None:
    body = _body
    if body is None:  # only if DBOS outlives the App that launched it
        raise RuntimeError("no turnkit App is running in this process")
    await body(DBOS.workflow_id or "", session_id)


class _DropCancelled(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "task cancelled" not in record.getMessage()


@contextlib.contextmanager
def _quiet_cancellations() -> Iterator[None]:
    logger, dropped = logging.getLogger("dbos"), _DropCancelled()
    logger.addFilter(dropped)
    try:
        yield
    finally:
        logger.removeFilter(dropped)


class Dispatcher:
    """Launches DBOS on the App's database and gives busy sessions their runners."""

    # For crash tests only: called between an input's commit and its runner's start.
    before_start: ClassVar[Callable[[str], None] | None] = None

    def __init__(
        self,
        databases: Databases,
        executor_id: str,
        polling_interval: float,
        max_running: int,
    ) -> None:
        self.databases = databases
        self.executor_id = executor_id
        self.polling_interval = polling_interval
        self.max_running = max_running
        self.client: DBOSClient | None = None
        self.launched = False
        self._run_session: Callable[[str, str], Awaitable[None]] | None = None
        self.slots = Slots(max_running)
        self._wake = threading.Event()  # a slot freed, or a runner started waiting here
        self.slots.on_free = self._wake.set
        self._taker: threading.Thread | None = None
        self._stopping = threading.Event()
        self._others_wait = False  # runners waited in the table when last looked
        self._direct: set[str] = set()  # runner ids started here with a slot taken for them
        self._direct_lock = threading.Lock()
        self._loop: LoopThread | None = None
        # The executor lease (runtime/executors.py): whether this process holds its
        # id now, and what a runner awaits before it runs (under the holder of then).
        self.holds_lease: Callable[[], bool] = lambda: True
        self.admit: Callable[[], Awaitable[None]] | None = None
        # Asks one runner lingering here to give its slot up; hands a queued turn to
        # its session's runner lingering here (runtime/lingering.py).
        self.evict: Callable[[], object] = lambda: False
        self.hand_over: Callable[[Tx, str, str], object] = lambda tx, sid, runner: False

    # -- launch and shutdown -------------------------------------------------

    def launch(self, run_session: Callable[[str, str], Awaitable[None]] | None) -> None:
        """Start DBOS in this process (blocking; call it off the event loop).

        Without ``run_session`` only the client side starts: turns are
        enqueued here, and other processes run them.
        """
        global _body
        self._client()
        if run_session is None:
            return
        with _lock:
            if _body is not None:
                raise RuntimeError(
                    "another turnkit App is already running in this process (DBOS is one "
                    "per process); leave it (async with / with) before starting this one"
                )
            _body = self._run_body
        self._run_session = run_session
        try:
            self._retire_queue()
            self._launch()
            self._loop = LoopThread("turnkit-turns")
        except BaseException:
            self.shutdown()
            raise

    def _client(self) -> None:
        url = self.databases.url
        DBOS.migrate(url)
        engine = self.databases.dbos
        self.client = DBOSClient(
            system_database_url=None if engine is not None else url,
            system_database_engine=engine,
            application_name="turnkit",
        )

    def _retire_queue(self) -> None:
        """Delete the DBOS queue of earlier versions once nothing waits on it (until
        then DBOS, which polls every registered queue, runs what is left there)."""
        assert self.client is not None
        if self.client.retrieve_queue(QUEUE) is None:
            return
        if self.client.list_workflows(queue_name=QUEUE, status="ENQUEUED", load_input=False):
            return
        self.client.delete_queue(QUEUE)

    def _launch(self) -> None:
        url, engine = self.databases.url, self.databases.dbos
        self.launched = True
        config: dict[str, Any] = {
            "name": "turnkit",
            "system_database_url": url,
            "application_version": APP_VERSION,
            "executor_id": self.executor_id,
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": 0.05,
        }
        if engine is not None:
            config["system_database_engine"] = engine
        DBOS(config=config)  # type: ignore[arg-type]
        DBOS.launch()

    def shutdown(self) -> None:
        """Stop DBOS; runners still running resume at the next launch."""
        global _body
        self._stopping.set()
        self._wake.set()
        if self._taker is not None:
            self._taker.join()
            self._taker = None
        loop, self._loop = self._loop, None
        try:
            # Turns cut short here resume at the next start; DBOS's warning about each
            # cancelled task (the runners here stop first, then DBOS's) is only noise.
            with _quiet_cancellations():
                if loop is not None:
                    loop.close()
                if self.launched:
                    DBOS.destroy(workflow_completion_timeout_sec=0)
        finally:
            if self.client is not None:
                self.client.destroy()
                self.client = None
            if self.launched:
                self.launched = False
                with _lock:
                    _body = None

    # -- runners ---------------------------------------------------------------

    def turn_queued(self, tx: Tx, session_id: str) -> None:
        """In the transaction that queued a turn: name the session's runner if it has none."""
        runner = tx.execute(_RUNNER_OF, {"sid": session_id}).scalar()
        if runner is None:
            self._name_runner(tx, session_id)
        elif self._runs_turns_now():  # after the rest of the input's writes (its event)
            tx.before_commit(lambda: self.hand_over(tx, session_id, runner))

    def _name_runner(self, tx: Tx, session_id: str) -> str:
        runner_id = f"run-{session_id}-{tx.bump(session_id, 'runner_seq')}"
        tx.execute(_NAME_RUNNER, {"sid": session_id, "runner_id": runner_id})
        if self._reserve(runner_id):
            tx.on_rollback(lambda: self._unreserve(runner_id))
            tx.after_commit(lambda: self._start(runner_id, session_id))
        else:
            waiting.wait(tx, runner_id, session_id)
            self._others_wait = True
            tx.after_commit(self._wake.set)  # this process's slot may have freed meanwhile
        return runner_id

    def _reserve(self, runner_id: str) -> bool:
        """Take a slot for a direct start of ``runner_id`` if one is free."""
        if not self._runs_turns_now() or not self.slots.try_take():
            return False
        with self._direct_lock:
            self._direct.add(runner_id)
        return True

    def _runs_turns_now(self) -> bool:
        return self._loop is not None and self.holds_lease()

    # -- runners waiting for a slot ------------------------------------------

    def take_waiting(self, store: Store) -> None:
        """Start looking for waiting runners to take (from this process's taker thread)."""
        self._taker = threading.Thread(
            target=self._take_loop, args=(store,), name="turnkit-taker", daemon=True
        )
        self._taker.start()

    def _take_loop(self, store: Store) -> None:
        wait = self.polling_interval
        while not self._stopping.is_set():
            self._wake.wait(wait)
            self._wake.clear()
            if self._stopping.is_set():
                return
            wait = self.polling_interval
            try:
                while (took := self._take_some(store)) is True:
                    pass
                if took is None:  # a lingering runner was asked to leave: look again soon
                    wait = min(wait, _EVICTED_LOOK_S)
            except Exception as err:  # the database is unreachable: the next look retries
                log.warning("turnkit: taking waiting runners failed (will retry): %s", err)

    def _take_some(self, store: Store) -> bool | None:
        """Take as many waiting runners as this process has free slots; whether it
        took any (there may be more), None when it asked a lingering runner to
        make room instead."""
        if not self._runs_turns_now():
            return False
        self._others_wait = waiting.anything_waits(self.databases.read)
        if not self._others_wait:
            return False
        if not self.slots.free():
            # A runner lingering for its session's next input gives its slot up; the
            # freed slot wakes this thread again.
            return None if self.evict() else False
        reserved = self.slots.take_up_to(self.max_running)
        if not reserved:  # taken meanwhile
            return False
        taken: list[tuple[str, str]] = []
        try:
            with store.write() as tx:
                taken = waiting.take(tx, reserved)
        finally:
            for _ in range(reserved - len(taken)):
                self.slots.give()
        with self._direct_lock:
            self._direct.update(runner_id for runner_id, _ in taken)
        for runner_id, session_id in taken:
            self._start(runner_id, session_id)
        return bool(taken)

    def may_linger(self) -> bool:
        """Whether a runner whose session has nothing queued may keep its slot for a
        moment (not while a runner here waits for one; one waiting in the table
        evicts it: :meth:`_take_some`)."""
        return not self._others_wait and not self.slots.waited_for()

    def _unreserve(self, runner_id: str) -> None:
        """The direct start of ``runner_id`` will not run: its slot goes back."""
        with self._direct_lock:
            if runner_id not in self._direct:
                return  # its body has it
            self._direct.discard(runner_id)
        self.slots.give()

    def _start(self, runner_id: str, session_id: str) -> None:
        if Dispatcher.before_start is not None:
            Dispatcher.before_start(runner_id)
        loop = self._loop
        if loop is None:  # stopping: the runner is found by the next launch's recovery
            self._unreserve(runner_id)
            return
        # In a context of its own: this may run in a thread that carries a running
        # workflow's DBOS context (a turn's end starting a subscriber's runner), and
        # a workflow started there would be taken for that workflow's child step.
        contextvars.Context().run(loop.submit, self._start_async(runner_id, session_id))

    async def _start_async(self, runner_id: str, session_id: str) -> None:
        try:
            with SetWorkflowID(runner_id):
                await DBOS.start_workflow_async(_runner_workflow, session_id)
        except Exception:  # the database refused: recovery at the next launch starts it
            log.exception("turnkit: starting runner %s failed", runner_id)
            self._unreserve(runner_id)

    async def _run_body(self, runner_id: str, session_id: str) -> None:
        with self._direct_lock:
            direct = runner_id in self._direct
            self._direct.discard(runner_id)
        if not direct:  # from the queue or recovered: wait for a slot of this process
            await self.slots.take()
        try:
            if self.admit is not None:
                await self.admit()
            assert self._run_session is not None
            await self._run_session(runner_id, session_id)
        except LeaseLost:
            log.warning("turnkit: runner %s stopped: its session was taken over", runner_id)
            raise asyncio.CancelledError from None  # DBOS records nothing: not its run now
        finally:
            self.slots.give()

    def running_by_executor(self) -> dict[str, int]:
        """How many session runners each executor id runs now (DBOS's records)."""
        assert self.client is not None, "the engine is not launched"
        pending = self.client.list_workflows(
            status="PENDING", name=WORKFLOW, load_input=False, load_output=False
        )
        counts: dict[str, int] = {}
        for status in pending:
            key = status.executor_id or ""
            counts[key] = counts.get(key, 0) + 1
        return counts

    # -- recovery --------------------------------------------------------------

    def recover(self, store: Store) -> int:
        """Give every session with work left a live runner; how many were (re)started.

        Call it once the store is built (``store`` writes through it, with its
        lock). Finds sessions whose runner DBOS does not know (a crash between an
        input's commit and its runner's start) or whose runner has finished
        without giving the session up, and sessions with queued turns and no
        runner at all (a database written by an older turnkit).
        """
        with self.databases.read.connect() as conn:
            named = conn.execute(
                sa.select(t.sessions.c.id, t.sessions.c.runner).where(
                    t.sessions.c.runner.is_not(None)
                )
            ).all()
            queued = sa.select(t.turns.c.session_id).where(t.turns.c.status == TurnState.QUEUED)
            unnamed = conn.execute(
                sa.select(t.sessions.c.id).where(
                    t.sessions.c.runner.is_(None), t.sessions.c.id.in_(queued)
                )
            ).all()
            waits = waiting.waiting_ids(conn)
        started = 0
        for session_id, runner_id in named:
            if runner_id in waits:  # not lost: a process with a free slot takes it
                continue
            status = DBOS.get_workflow_status(runner_id)
            if status is None:
                self._start_now(runner_id, session_id)
                started += 1
            elif status.status in _FINISHED:
                started += self._replace(store, session_id, runner_id)
        for (session_id,) in unnamed:
            started += self._replace(store, session_id, None)
        return started

    def _start_now(self, runner_id: str, session_id: str) -> None:
        with SetWorkflowID(runner_id):
            DBOS.start_workflow(_runner_workflow, session_id)

    def _replace(self, store: Store, session_id: str, stale: str | None) -> int:
        with store.write() as tx:
            row = tx.lock_session(session_id)
            if row.runner != stale:
                return 0
            statement = t.sessions.update().where(t.sessions.c.id == session_id)
            tx.execute(statement.values(runner=None))
            self._name_runner(tx, session_id)
        return 1
