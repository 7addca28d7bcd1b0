"""The ``_sync`` twins of :class:`turnkit.sessions.App`'s coroutines.

Each runs its coroutine to completion on a private loop (``run_sync``), with
the same signature as the coroutine it wraps (a test compares them). Kept
apart so the App's own module holds only what an App does.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from turnkit._sync import run_sync

if TYPE_CHECKING:
    from turnkit.messages import Message
    from turnkit.sessions.model.executors import ExecutorInfo
    from turnkit.sessions.model.inputs import AgentInput
    from turnkit.sessions.model.records import Event, Receipt, Session, Turn

__all__ = ["SyncTwins"]


class SyncTwins:
    """Mixed into App: one blocking twin per public coroutine."""

    def create_session_sync(
        self, agent: str, key: str | None = None, data: dict[str, Any] | None = None
    ) -> Session:
        return run_sync(self.create_session(agent, key, data))

    def open_session_sync(
        self, agent: str, key: str | None = None, data: dict[str, Any] | None = None
    ) -> tuple[Session, bool]:
        return run_sync(self.open_session(agent, key, data))

    def get_session_sync(self, session_id: str) -> Session:
        return run_sync(self.get_session(session_id))

    def executors_sync(self) -> list[ExecutorInfo]:
        return run_sync(self.executors())

    def find_session_sync(self, agent: str, key: str) -> Session | None:
        return run_sync(self.find_session(agent, key))

    def list_sessions_sync(
        self,
        agent: str | None = None,
        status: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[Session]:
        return run_sync(self.list_sessions(agent, status, limit, before))

    def fork_session_sync(
        self, session_id: str, at: int | None = None, key: str | None = None
    ) -> Session:
        return run_sync(self.fork_session(session_id, at, key))

    def open_fork_sync(
        self, session_id: str, at: int | None = None, key: str | None = None
    ) -> tuple[Session, bool]:
        return run_sync(self.open_fork(session_id, at, key))

    def history_sync(self, session_id: str) -> list[Message]:
        return run_sync(self.history(session_id))

    def end_session_sync(self, session_id: str) -> Session:
        return run_sync(self.end_session(session_id))

    def send_sync(
        self,
        session_id: str,
        text: str | None = None,
        payload: Any = None,
        source: str = "user",
        idempotency_key: str | None = None,
        answers: str | None = None,
        channel: Any = None,
        on_busy: str | None = None,
    ) -> Receipt:
        return run_sync(
            self.send(session_id, text, payload, source, idempotency_key, answers, channel, on_busy)
        )

    def approve_sync(self, session_id: str, decisions: Any, reason: str | None = None) -> Receipt:
        return run_sync(self.approve(session_id, decisions, reason))

    def wait_sync(self, turn_id: str, timeout: float | None = None) -> Turn:
        return run_sync(self.wait(turn_id, timeout))

    def get_turn_sync(self, turn_id: str) -> Turn:
        return run_sync(self.get_turn(turn_id))

    def input_sync(self, turn_id: str) -> AgentInput:
        return run_sync(self.input(turn_id))

    def events_sync(self, session_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        return run_sync(self.events(session_id, after, limit))

    def cancel_sync(self, session_id: str) -> str | None:
        return run_sync(self.cancel(session_id))

    def subscribe_sync(
        self, session_id: str, to_session: str | None = None, to_agent: str | None = None
    ) -> str:
        return run_sync(self.subscribe(session_id, to_session, to_agent))

    def unsubscribe_sync(
        self, session_id: str, to_session: str | None = None, to_agent: str | None = None
    ) -> bool:
        return run_sync(self.unsubscribe(session_id, to_session, to_agent))

    def deliver_webhook_sync(self, id: str, headers: Any, body: bytes) -> Any:
        return run_sync(self.deliver_webhook(id, headers, body))

    def run_schedules_sync(self, now: datetime) -> list[Any]:
        return run_sync(self.run_schedules(now))

    def schedules_sync(self, now: datetime | None = None) -> list[Any]:
        return run_sync(self.schedules(now))

    def start_sync(self) -> None:
        run_sync(self.start())

    def stop_sync(self) -> None:
        run_sync(self.stop())
