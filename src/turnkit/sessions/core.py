"""What a started App holds: engines, store, turn log, runner, DBOS and wake-ups."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from turnkit.sessions import schema
from turnkit.sessions._db import Engines, resolve_url
from turnkit.sessions.engine import DbosEngine
from turnkit.sessions.notify import Notifier, postgres_probe, sqlite_probe
from turnkit.sessions.records import TERMINAL, Event, Turn
from turnkit.sessions.runner import TurnRunner
from turnkit.sessions.store import Store, ended_key
from turnkit.sessions.turnlog import TurnLog

__all__ = ["Core"]

FOLLOW_RECHECK_S = 5.0


class Core:
    """The running parts of one started App (built and torn down off the event loop)."""

    def __init__(
        self, app: Any, url: str | None, executor_id: str, polling: float, workers: bool
    ) -> None:
        self.app = app
        self.url = resolve_url(url)
        self.executor_id = executor_id
        self.polling = polling
        self.workers = workers

    def open(self) -> None:
        engines = self.engines = Engines(self.url)
        try:
            schema.migrate(engines.write)
            probe = sqlite_probe(engines.read) if engines.sqlite else postgres_probe(engines.read)
            self.notifier = Notifier(probe)
            self.dbos = DbosEngine(engines, self.executor_id, self.polling)
            self.store = Store(engines, self.dbos.enqueue, self.notifier.notify)
            self.log = TurnLog(self.store)
            self.runner = TurnRunner(self.log, self.app)
            self.dbos.launch(self.runner if self.workers else None)
            self.notifier.on_change(self._check_cancels)
        except BaseException:
            engines.dispose()
            raise

    def close(self) -> None:
        try:
            self.dbos.shutdown()
        finally:
            self.notifier.close()
            self.engines.dispose()

    # -- cancellation --------------------------------------------------------

    def cancel_turn(self, turn_id: str, reason: str) -> None:
        """Ask ``turn_id`` to stop: at once if it runs here, else via the database."""
        self.store.request_cancel(turn_id, reason)
        self.runner.cancel(turn_id, reason)

    def _check_cancels(self) -> None:
        """After any change: stop local turns that another process asked to cancel."""
        local = self.runner.local_turns
        if not local:
            return
        for turn_id, reason in self.store.cancel_requests(local).items():
            self.runner.cancel(turn_id, reason)

    # -- waiting -------------------------------------------------------------

    async def wait_turn(self, turn_id: str, timeout: float | None) -> Turn:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        key = None  # woken only when a turn of its session ends
        while True:
            seen = self.notifier.version(key or "")
            status, found = await asyncio.to_thread(self.store.turn_status, turn_id)
            if status in TERMINAL:
                return await asyncio.to_thread(self.store.turn, turn_id)
            if key is None:  # now the session is known: wait on it
                key = ended_key(found)
                continue
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                raise TimeoutError(f"turn {turn_id!r} is still {status} after {timeout} s")
            await self.notifier.wait(key, seen, left)

    async def follow(self, session_id: str, after: int) -> AsyncIterator[Event]:
        while True:
            seen = self.notifier.version(session_id)
            events = await asyncio.to_thread(self.store.events, session_id, after, 500)
            for event in events:
                yield event
                after = event.seq
            if events:
                continue
            _, ended = await asyncio.to_thread(self.store.session_agent, session_id)
            if ended and not await asyncio.to_thread(self.store.running_turns, session_id):
                if not await asyncio.to_thread(self.store.events, session_id, after, 1):
                    return
                continue
            await self.notifier.wait(session_id, seen, FOLLOW_RECHECK_S)
