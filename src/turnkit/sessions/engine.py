"""The DBOS side of sessions: one durable workflow per turn, on a queue partitioned by session.

A turn's workflow is enqueued in the same database transaction that stores
its input (``DBOSClient.enqueue_in_transaction``), so an accepted input always
has a workflow and a crash cannot leave one without the other. The queue runs
one workflow per session at a time (``partition_concurrency=1``) and sessions
in parallel. Workflows are tokens: each one claims the session's lowest
queued turn when it starts (DBOS may dequeue inputs enqueued in the same
second in any order on SQLite), and a recovered workflow resumes the turn it
had claimed.

DBOS is one per process, so one App runs its engine in a process at a time.
Workflows run on DBOS's own event loop thread, apart from the caller's loop.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, DBOSClient

from turnkit.sessions._db import Engines

__all__ = ["APP_VERSION", "QUEUE", "WORKFLOW", "DbosEngine"]

QUEUE = "turnkit_turns"
WORKFLOW = "turnkit_turn"
# Fixed, so workflows are recovered across restarts of changed user code:
# a turn's progress is replayed from turnkit's own step records.
APP_VERSION = "turnkit-1"

Runner = Callable[[str, str], Awaitable[None]]

_lock = threading.Lock()
_runner: Runner | None = None


@DBOS.workflow(name=WORKFLOW)
async def _turn_workflow(session_id: str) -> None:
    runner = _runner
    if runner is None:  # only if DBOS outlives the App that launched it
        raise RuntimeError("no turnkit App is running in this process")
    await runner(DBOS.workflow_id or "", session_id)


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


class DbosEngine:
    """Launches DBOS on the App's database and enqueues turn workflows."""

    def __init__(self, engines: Engines, executor_id: str, polling_interval: float) -> None:
        self.engines = engines
        self.executor_id = executor_id
        self.polling_interval = polling_interval
        self.client: DBOSClient | None = None
        self.launched = False

    def launch(self, runner: Runner | None) -> None:
        """Start DBOS in this process (blocking; call it off the event loop).

        Without a ``runner`` only the client side starts: turns can be
        enqueued here, and other processes run them.
        """
        global _runner
        if runner is None:
            self._client()
            return
        with _lock:
            if _runner is not None:
                raise RuntimeError(
                    "another turnkit App is already running in this process (DBOS is one "
                    "per process); leave it (async with / with) before starting this one"
                )
            _runner = runner
        try:
            self._launch()
        except BaseException:
            self.shutdown()
            raise

    def _client(self) -> None:
        url = self.engines.url
        DBOS.migrate(url)
        engine = self.engines.dbos
        self.client = DBOSClient(
            system_database_url=None if engine is not None else url,
            system_database_engine=engine,
            application_name="turnkit",
        )
        self.client.register_queue(
            QUEUE, partition_concurrency=1, polling_interval_sec=self.polling_interval
        )

    def _launch(self) -> None:
        self._client()
        url, engine = self.engines.url, self.engines.dbos
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

    def enqueue(self, conn: sa.Connection, turn_id: str, session_id: str) -> None:
        """Enqueue the workflow of ``turn_id`` inside the caller's transaction."""
        assert self.client is not None, "the engine is not launched"
        options: Any = {
            "workflow_name": WORKFLOW,
            "queue_name": QUEUE,
            "workflow_id": f"turn-{turn_id}",
            "queue_partition_key": session_id,
            "app_version": APP_VERSION,
        }
        self.client.enqueue_in_transaction(conn, options, session_id)

    def shutdown(self) -> None:
        """Stop DBOS; workflows still running resume at the next launch."""
        global _runner
        try:
            if self.launched:
                # Turns cut short here resume at the next start; DBOS's warning about
                # each cancelled task would only be noise.
                with _quiet_cancellations():
                    DBOS.destroy(workflow_completion_timeout_sec=0)
        finally:
            if self.client is not None:
                self.client.destroy()
                self.client = None
            if self.launched:
                self.launched = False
                with _lock:
                    _runner = None
