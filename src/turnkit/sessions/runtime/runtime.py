"""What a started App holds: databases, store, journal, dispatcher, worker and wake-ups.

Built and torn down off the event loop (:meth:`Runtime.open`,
:meth:`Runtime.close`). The input sources (webhooks, schedules, channels)
and the server reach sessions through this object and the App's public
methods, never through the App's private names.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from turnkit.errors import HopLimitError
from turnkit.sessions.db import schema, turns
from turnkit.sessions.db.engines import Databases, resolve_url
from turnkit.sessions.db.inputs import NewInput, accept_input
from turnkit.sessions.db.steps import Journal
from turnkit.sessions.db.store import (
    Store,
    TurnEndListener,
    ended_key,
    event_record,
    queued_key,
)
from turnkit.sessions.model.events import TURN_END_TYPES, InputReceived, InputRefused
from turnkit.sessions.model.executors import ExecutorInfo
from turnkit.sessions.model.records import Event, Receipt, Session, Turn
from turnkit.sessions.runtime.dispatch import Dispatcher
from turnkit.sessions.runtime.executors import (
    ExecutorLease,
    executor_infos,
    recover_workflows_of,
)
from turnkit.sessions.runtime.listen import publisher, start_listening
from turnkit.sessions.runtime.live import LiveHub
from turnkit.sessions.runtime.notify import Notifier, change_feed
from turnkit.sessions.runtime.runner import TurnWorker
from turnkit.sessions.runtime.shared_reads import SharedReads
from turnkit.sessions.sources.subscriptions import SubscriptionFanOut

if TYPE_CHECKING:
    from turnkit.sessions.definitions import Definitions
    from turnkit.sessions.sources.subagents import ToolCallScope

__all__ = ["Runtime", "Settings"]

log = logging.getLogger("turnkit.sessions")

FOLLOW_RECHECK_S = 5.0
DEFAULT_MAX_HOPS = 8
DEFAULT_LEASE_S = 10.0


@dataclass(frozen=True, slots=True)
class Settings:
    """How an App runs: where its database is, who it is, how many turns it runs."""

    database_url: str | None
    executor_id: str
    polling_interval: float
    workers: bool
    max_running: int
    max_hops: int = DEFAULT_MAX_HOPS  # turn outcomes and sub-agent tasks in one chain
    lease_seconds: float = DEFAULT_LEASE_S  # of the executor id (see runtime/executors.py)


def _keys_of(session_id: str, types: set[str]) -> tuple[str, ...]:
    """The keys that another process's new events in a session wake (see notify.py)."""
    keys = (session_id,)
    if not types.isdisjoint(TURN_END_TYPES):
        keys += (ended_key(session_id),)
    if InputReceived.type in types:  # every turn is queued with its input's event
        keys += (queued_key(session_id),)
    return keys


class Runtime:
    """The running parts of one started App."""

    def __init__(
        self,
        definitions: Definitions,
        settings: Settings,
        listeners: Sequence[TurnEndListener] = (),
    ) -> None:
        self.definitions = definitions
        self.settings = settings
        self.url = resolve_url(settings.database_url)
        self._listeners = list(listeners)

    def open(self) -> None:
        databases = self.databases = Databases(self.url)
        self.listener = None
        try:
            schema.migrate(databases.write)
            s = self.settings
            self.lease = ExecutorLease(
                databases.write, s.executor_id, s.lease_seconds, s.workers, s.max_running
            )
            self.lease.acquire()  # before DBOS recovers this id's workflows
        except BaseException:
            databases.dispose()
            raise
        try:
            self._open(databases, s)
        except BaseException:
            self.lease.stop()
            self.lease.release()
            databases.dispose()
            raise

    def _open(self, databases: Databases, s: Settings) -> None:
        self.notifier = Notifier(
            change_feed(databases.read, databases.sqlite),
            _keys_of,
        )
        self.dispatcher = Dispatcher(databases, s.executor_id, s.polling_interval, s.max_running)
        self.dispatcher.holds_lease = lambda: self.lease.live
        self.dispatcher.admit = self.lease.admit
        self.store = Store(databases, self.dispatcher, self.notifier.committed)
        self.reads = SharedReads()  # one read for the followers woken together
        self.store.fence = self.lease.fence
        origin = uuid.uuid4().hex  # this process in its own NOTIFYs (listen.py)
        self.store.publish = publisher(databases, origin)
        self._origin = origin
        self.store.listeners = [SubscriptionFanOut(s.max_hops), *self._listeners]
        self.journal = Journal(self.store)
        self.worker = TurnWorker(
            self.journal,
            self.definitions,
            self.delegate,
            self.notifier,
            self.dispatcher.may_linger,
        )
        self.journal.keep_sessions = self.worker.lingerers.keep
        self.dispatcher.evict = self.worker.lingerers.evict_one
        self.dispatcher.hand_over = self.worker.lingerers.hand_over
        self.store.on_busy = self._on_busy
        self.store.cancel_local = self.worker.cancel
        self.live = self.worker.live = LiveHub(databases, self.store, self.notifier.recent)
        self.dispatcher.launch(self.worker.run_session if s.workers else None)
        if s.workers:  # after DBOS's own recovery: the runners it could not know of
            self.dispatcher.recover(self.store)
            self.dispatcher.take_waiting(self.store)
        self.listener = start_listening(databases, self.notifier, self._origin)
        self.notifier.on_change(self._check_cancels)
        self.lease.start(self._take_over if s.workers else None)

    def _take_over(self, executor_ids: list[str]) -> None:
        """From the lease thread: resume the turns of executors whose lease lapsed."""
        resumed = recover_workflows_of(executor_ids)
        started = self.dispatcher.recover(self.store)  # runners named there, never started
        log.warning(
            "turnkit: took over executors %s: %d runners resumed, %d started",
            ", ".join(executor_ids),
            resumed,
            started,
        )

    def _on_busy(self, agent: str) -> str:
        found = self.definitions.agents.get(agent)
        return "queue" if found is None else found.on_busy

    def close(self) -> None:
        self.lease.stop()
        try:
            self.dispatcher.shutdown()
            self.lease.release()  # after the runners here stopped: a live process resumes them
        finally:
            if self.listener is not None:
                self.listener.close()
            self.live.close()
            self.notifier.close()
            self.databases.dispose()

    # -- executors -------------------------------------------------------------

    def executors(self) -> list[ExecutorInfo]:
        """Every executor id on this database, its lease and its running runners (blocking)."""
        return executor_infos(self.databases.write, self.dispatcher.running_by_executor())

    # -- inputs and sessions ---------------------------------------------------

    def accept(self, session_id: str, new: NewInput) -> Receipt:
        """Store and route an input (blocking): its receipt."""
        return accept_input(self.store, session_id, new)

    def open_session(
        self, agent: str, key: str | None, data: dict[str, Any], parent_id: str | None = None
    ) -> tuple[Session, bool]:
        """Get or create a session in one transaction (blocking)."""
        return self.store.open_session(agent, key, data, parent_id)

    def end_session(self, session_id: str) -> None:
        """End the session; its running turns stop (blocking)."""
        with self.store.write() as tx:
            running = turns.end_session(tx, session_id)
        for turn_id in running:
            self.worker.cancel(turn_id, "session_ended")

    # -- cancellation ----------------------------------------------------------

    def cancel_running(self, session_id: str, reason: str) -> list[str]:
        """Ask the session's running turns to stop (here at once, elsewhere via the
        database); their ids (blocking)."""
        with self.store.write() as tx:
            tx.lock_session(session_id)
            running = [
                turn_id
                for turn_id in turns.running(tx, session_id)
                if turns.request_cancel(tx, turn_id, reason)
            ]
            for turn_id in running:  # this process's own turns stop after the commit
                tx.after_commit(lambda turn_id=turn_id: self.worker.cancel(turn_id, reason))
            tx.appended.add(session_id)  # other processes look at their turns
        return running

    def _check_cancels(self) -> None:
        """After any change: stop local turns that another process asked to cancel."""
        local = self.worker.local_turns
        if not local:
            return
        for turn_id, reason in self.store.cancel_requests(local).items():
            self.worker.cancel(turn_id, reason)

    # -- waiting ---------------------------------------------------------------

    async def wait_turn(self, turn_id: str, timeout: float | None) -> Turn:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        ended, session_id = await asyncio.to_thread(self.store.turn_if_ended, turn_id)
        if ended is not None:
            return ended
        # Woken only when a turn of its session ends.
        with self.notifier.watching(ended_key(session_id)) as watch:
            while True:
                seen = watch.version()
                ended, _ = await asyncio.to_thread(self.store.turn_if_ended, turn_id)
                if ended is not None:
                    return ended
                left = None if deadline is None else deadline - loop.time()
                if left is not None and left <= 0:
                    status, _ = await asyncio.to_thread(self.store.turn_status, turn_id)
                    raise TimeoutError(f"turn {turn_id!r} is still {status} after {timeout} s")
                await watch.wait(seen, left)

    async def follow(self, session_id: str, after: int) -> AsyncIterator[Event]:
        recent, reads = self.notifier.recent, self.reads
        with self.notifier.watching(session_id) as watch, recent.following(session_id):
            given = None  # the version at which memory gave all there was to give
            while True:
                seen = watch.version()
                if seen == given:  # nothing was written since, here or (seen) elsewhere
                    given = None
                    await watch.wait(seen, FOLLOW_RECHECK_S)
                    continue
                events, whole = recent.after(session_id, after, 500)
                if not events:  # read once for the followers that saw the same version
                    read = partial(asyncio.to_thread, self.store.event_rows, session_id, after, 500)
                    rows = await reads.once(("events", session_id, after, seen), read)
                    events = [event_record(row) for row in rows]
                elif whole and not any(event.type in TURN_END_TYPES for event in events):
                    given = seen  # (a turn's end may be the ended session's last event)
                for event in events:
                    yield event
                    after = event.seq
                if events:
                    continue
                over = partial(asyncio.to_thread, self._over, session_id)
                if await reads.once(("over", session_id, seen), over):
                    if not await asyncio.to_thread(self.store.events, session_id, after, 1):
                        return
                    continue
                await watch.wait(seen, FOLLOW_RECHECK_S)

    def _over(self, session_id: str) -> bool:
        """Whether the session has ended and runs no turn (blocking)."""
        _, ended = self.store.session_agent(session_id)
        return ended and not self.store.running_turns(session_id)

    # -- sub-agents ------------------------------------------------------------

    async def delegate(
        self, scope: ToolCallScope, agent: str, task: str, payload: Any, wait: bool
    ) -> str:
        """A subagent tool call: the child session and its turn, keyed by the call."""
        from turnkit.sessions.model import checks as check
        from turnkit.sessions.sources.subagents import child_key, child_result, started
        from turnkit.sessions.sources.subscriptions import subscribe

        self.definitions.agent_named(agent)
        text, payload_json = check.check_text(task, "task"), check.check_payload(payload)
        hops = scope.hops + 1
        if hops > self.settings.max_hops:
            await asyncio.to_thread(self._refuse_task, scope, agent, hops)
            raise HopLimitError(f"a task for agent {agent!r}", hops, self.settings.max_hops)
        new = NewInput(
            "subagent", text, payload_json, {}, idempotency_key="subagent-task", hops=hops
        )
        key = child_key(scope.turn_id, scope.call_id)
        child, _ = await asyncio.to_thread(self.open_session, agent, key, {}, scope.session_id)
        if not wait:  # before the task is sent: no outcome can come before it
            await asyncio.to_thread(subscribe, self.store, scope.session_id, child.id, None)
        receipt = await asyncio.to_thread(self.accept, child.id, new)
        if not wait:
            return started(child.id, receipt.turn_id)
        async with self.dispatcher.slots.lent():  # the child may need this process's slot
            turn = await self.wait_turn(receipt.turn_id or "", None)
        return child_result(turn)

    def _refuse_task(self, scope: ToolCallScope, agent: str, hops: int) -> None:
        refused = InputRefused("subagent", [], hops, self.settings.max_hops, to_agent=agent)
        with self.store.write() as tx:
            tx.emit(scope.session_id, refused, scope.turn_id)
