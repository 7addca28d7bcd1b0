"""The App's webhooks and schedules: defining them, and firing or delivering them.

Mixed into :class:`turnkit.sessions.App` (which holds ``_webhooks`` and
``_schedules`` and its started ``runtime``); the work is in
:mod:`turnkit.sessions.sources`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

__all__ = ["SourceMethods"]


class SourceMethods:
    """``webhook``/``deliver_webhook`` and ``schedule``/``run_schedules``/``schedules``."""

    _webhooks: dict[str, Any]
    _schedules: dict[str, Any]
    agents: dict[str, Any]
    runtime: Any

    def webhook(
        self,
        id: str,
        agent: str,
        secret: str | bytes,
        session_key: Callable[[Any], str] | str | None = None,
    ) -> None:
        """Accept Standard Webhooks deliveries at ``POST /webhooks/{id}`` as inputs of ``agent``.

        ``secret`` is ``whsec_`` + base64 of the key. ``session_key`` names
        the session each delivery goes to: a function of the payload that
        returns its key, a string (one fixed session, as for ``schedule``),
        or None (one session of this webhook).
        """
        from turnkit.sessions.sources.webhooks import define_webhook

        if id in self._webhooks:
            raise ValueError(f"app.webhook: a webhook {id!r} is already defined")
        self._webhooks[id] = define_webhook(self.agents, id, agent, secret, session_key)

    async def deliver_webhook(self, id: str, headers: Any, body: bytes) -> Any:
        """Verify one delivery to webhook ``id`` and store its input (a ``WebhookDelivery``)."""
        from turnkit.sessions.sources.webhooks import deliver_webhook

        return await deliver_webhook(self.runtime, self._webhooks.get(id), id, headers, body)

    def schedule(
        self,
        id: str,
        cron: str,
        agent: str,
        timezone: str = "UTC",
        dispatch: dict[str, Any] | None = None,
        overlap: str = "skip",
        session_key: Callable[[Any], str] | str | None = None,
    ) -> None:
        """Give ``agent`` an input at each instant of ``cron`` (five fields) in ``timezone``.

        ``dispatch`` is the input: ``{"text": ..., "payload": ...}`` (payload at
        most 32 KiB). ``overlap="skip"`` skips a fire while the previous fire's
        turn is queued or running (a ``schedule.skipped`` event). The session
        is ``session_key(ScheduleInfo)``, a fixed key, or (None) one session
        of this schedule.
        """
        from turnkit.sessions.sources.schedules import define_schedule

        if id in self._schedules:
            raise ValueError(f"app.schedule: a schedule {id!r} is already defined")
        self._schedules[id] = define_schedule(
            self.agents, id, cron, agent, timezone, dispatch, overlap, session_key
        )

    async def run_schedules(self, now: datetime) -> list[Any]:
        """Fire what is due at ``now`` (an aware datetime); a ``ScheduleFire`` per action."""
        from turnkit.sessions.sources.schedules import run_schedules

        return await run_schedules(self.runtime, self._schedules.values(), now)

    async def schedules(self, now: datetime | None = None) -> list[Any]:
        """Each schedule with its next fire time after ``now`` (default: the real time)."""
        from turnkit.sessions.sources.schedules import schedule_statuses, stamp_of, utc_now

        runtime = self.runtime
        when = stamp_of(utc_now() if now is None else now)
        defs = list(self._schedules.values())
        return await asyncio.to_thread(schedule_statuses, runtime, defs, when)
