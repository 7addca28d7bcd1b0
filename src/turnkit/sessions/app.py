"""App: agents defined as render functions, and the durable sessions they run.

See SPEC section 7. ``async with app`` (or ``with app``) opens the database,
launches DBOS and starts running turns in this process; every method needs
it, and every async method has a ``_sync`` twin.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from typing import Any

from turnkit._sync import run_sync
from turnkit.errors import InvalidInputError
from turnkit.messages import Message
from turnkit.sessions import _checks as check
from turnkit.sessions.definitions import Definitions
from turnkit.sessions.inputs import AgentInput
from turnkit.sessions.records import Event, Receipt, Session, Turn
from turnkit.sessions.store import NewInput

__all__ = ["App"]


class App(Definitions):
    """Agents and their durable sessions, on one database.

    ``database_url``: ``sqlite:///path.db`` or ``postgresql://user:pw@host/db``;
    None reads ``$TURNKIT_DATABASE_URL``, else uses SQLite at
    ``./.turnkit/turnkit.db`` (created on first use). ``executor_id`` names
    this process to DBOS (give each process sharing a database its own);
    ``polling_interval`` is how often the turn queue is checked, in seconds.
    ``workers=False`` runs no turns in this process (it sends, reads and
    follows; processes with workers run the turns). Every process that runs
    turns on a database must define the same agents. ``fire_schedules=False``
    leaves firing schedules to other processes or to explicit
    ``run_schedules(now)`` calls (tests); by default a started App calls it
    at start and each minute.

    >>> app = App("sqlite:///demo.db")
    >>> @app.agent("greeter", model="local")
    ... def greeter() -> str:
    ...     return "Greet the user by name."
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        executor_id: str | None = None,
        polling_interval: float = 0.02,
        workers: bool = True,
        fire_schedules: bool = True,
    ) -> None:
        self._database_url = database_url
        self._executor_id = executor_id or os.environ.get("TURNKIT_EXECUTOR_ID") or "local"
        self._polling_interval = polling_interval
        self._workers = workers
        super().__init__()
        self._core: Any = None
        self._webhooks: dict[str, Any] = {}
        self._schedules: dict[str, Any] = {}
        self._fire_schedules = fire_schedules
        self._ticker: Any = None
        self._channels: dict[str, Any] = {}  # provider -> channel (turnkit.channels)
        self._delivery: Any = None

    # -- lifecycle -----------------------------------------------------------

    async def start(self) -> None:
        """Open the database and run turns in this process (``async with app`` calls it)."""
        if self._core is not None:
            raise RuntimeError("this App is already started")
        from turnkit.sessions.core import Core

        core = Core(
            self, self._database_url, self._executor_id, self._polling_interval, self._workers
        )
        await asyncio.to_thread(core.open)
        self._core = core
        if self._fire_schedules:
            from turnkit.sessions.schedules import ScheduleTicker

            self._ticker = ScheduleTicker(self)
        self._start_channels(core)

    async def stop(self) -> None:
        """Stop running turns here; unfinished ones resume at the next start."""
        await self._stop_channels()
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            await ticker.stop()
        core, self._core = self._core, None
        if core is not None:
            await asyncio.to_thread(core.close)

    async def __aenter__(self) -> App:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def __enter__(self) -> App:
        run_sync(self.start())
        return self

    def __exit__(self, *exc: object) -> None:
        run_sync(self.stop())

    def _running(self) -> Any:
        if self._core is None:
            raise RuntimeError("the App is not started: use `async with app:` (or `with app:`)")
        return self._core

    # -- sessions ------------------------------------------------------------

    async def create_session(
        self, agent: str, key: str | None = None, data: dict[str, Any] | None = None
    ) -> Session:
        """A new session of ``agent``; with a ``key``, the existing one of that key if any."""
        core = self._running()
        self.agent_named(agent)
        key = check.check_key(key, "key")
        values = check.check_data(data)
        session, _ = await asyncio.to_thread(core.store.create_session, agent, key, values)
        return session

    async def get_session(self, session_id: str) -> Session:
        return await asyncio.to_thread(self._running().store.session, _id(session_id))

    async def history(self, session_id: str) -> list[Message]:
        """The session's durable conversation, oldest first."""
        core = self._running()
        await asyncio.to_thread(core.store.session_agent, _id(session_id))
        return list(await asyncio.to_thread(core.store.history, session_id))

    async def end_session(self, session_id: str) -> Session:
        """End the session: queued turns are cancelled, the running one too; sends then raise."""
        core = self._running()
        running = await asyncio.to_thread(core.store.end_session, _id(session_id))
        for turn_id in running:
            await asyncio.to_thread(core.cancel_turn, turn_id, "session_ended")
        return await asyncio.to_thread(core.store.session, session_id)

    async def send(
        self,
        session_id: str,
        text: str | None = None,
        payload: Any = None,
        source: str = "user",
        idempotency_key: str | None = None,
        answers: str | None = None,
        channel: Any = None,
    ) -> Receipt:
        """Give the session an input; it is durable when this returns."""
        core = self._running()
        new = NewInput(
            check.check_source(source),
            check.check_text(text),
            check.check_payload(payload),
            {},
            check.check_key(idempotency_key, "idempotency_key"),
            check.check_key(answers, "answers"),
        )
        if not new.text and new.payload_json == "null":
            raise InvalidInputError("text", "an input needs text or a payload; both are empty")
        channel_dict = check.check_channel(channel)
        if channel_dict is not None:
            new.details["channel"] = channel_dict
        return await asyncio.to_thread(core.store.accept_input, _id(session_id), new)

    async def wait(self, turn_id: str, timeout: float | None = None) -> Turn:
        """The turn once it is terminal; ``TimeoutError`` after ``timeout`` seconds."""
        return await self._running().wait_turn(_id(turn_id, "turn_id"), timeout)

    async def events(
        self, session_id: str, after: int = 0, limit: int | None = None
    ) -> list[Event]:
        """The session's events with ``seq`` above ``after``, oldest first."""
        core = self._running()
        return await asyncio.to_thread(core.store.events, _id(session_id), _seq(after), limit)

    async def follow(self, session_id: str, after: int = 0) -> AsyncIterator[Event]:
        """Every event after ``after``, then each new one as it is written (any process).

        Ends once the session has ended and its last event was given.
        """
        core = self._running()
        async for event in core.follow(_id(session_id), _seq(after)):
            yield event

    async def cancel(self, session_id: str) -> str | None:
        """Cancel the session's running turn (reason ``cancelled``); its id, or None."""
        core = self._running()
        running = await asyncio.to_thread(core.store.running_turns, _id(session_id))
        for turn_id in running:
            await asyncio.to_thread(core.cancel_turn, turn_id, "cancelled")
        return running[0] if running else None

    async def subscribe(
        self, session_id: str, to_session: str | None = None, to_agent: str | None = None
    ) -> str:
        """Deliver each terminal turn of ``to_session`` (or of any session of
        ``to_agent``) to ``session_id`` as an ``event`` input; the subscription's id."""
        from turnkit.sessions.subscriptions import subscribe

        core = self._running()
        to_session, to_agent = self._watched(to_session, to_agent)
        return await asyncio.to_thread(subscribe, core.store, _id(session_id), to_session, to_agent)

    async def unsubscribe(
        self, session_id: str, to_session: str | None = None, to_agent: str | None = None
    ) -> bool:
        """Stop a subscription; whether there was one."""
        from turnkit.sessions.subscriptions import unsubscribe

        core = self._running()
        to_session, to_agent = self._watched(to_session, to_agent)
        session_id = _id(session_id)
        return await asyncio.to_thread(unsubscribe, core.store, session_id, to_session, to_agent)

    def _watched(self, to_session: object, to_agent: object) -> tuple[str | None, str | None]:
        if (to_session is None) == (to_agent is None):
            raise InvalidInputError("to_session", "give exactly one of to_session and to_agent")
        if to_agent is not None:
            self.agent_named(to_agent)
        if to_session is not None:
            _id(to_session, "to_session")
        return to_session, to_agent  # type: ignore[return-value]

    async def _delegate(self, scope: Any, agent: str, task: str, payload: Any, wait: bool) -> str:
        """A subagent tool call: the child session and its turn, keyed by the call."""
        from turnkit.sessions.subagents import child_result, started
        from turnkit.sessions.subscriptions import subscribe

        core = self._running()
        self.agent_named(agent)
        new = NewInput("subagent", check.check_text(task, "task"), check.check_payload(payload), {})
        new.idempotency_key = "subagent-task"
        key = f"subagent:{scope.turn_id}:{scope.call_id}"
        store = core.store
        child, _ = await asyncio.to_thread(store.create_session, agent, key, {}, scope.session_id)
        if not wait:  # before the task is sent: no outcome can come before it
            await asyncio.to_thread(subscribe, store, scope.session_id, child.id, None)
        receipt = await asyncio.to_thread(store.accept_input, child.id, new)
        if not wait:
            return started(child.id, receipt.turn_id)
        return child_result(await core.wait_turn(receipt.turn_id or "", None))

    async def input(self, turn_id: str) -> AgentInput:
        """The input a turn runs on."""
        return (await asyncio.to_thread(self._running().store.turn, _id(turn_id, "turn_id"))).input

    # -- sync twins ----------------------------------------------------------

    def create_session_sync(self, agent: str, key: str | None = None, data: Any = None) -> Session:
        return run_sync(self.create_session(agent, key, data))

    def get_session_sync(self, session_id: str) -> Session:
        return run_sync(self.get_session(session_id))

    def history_sync(self, session_id: str) -> list[Message]:
        return run_sync(self.history(session_id))

    def end_session_sync(self, session_id: str) -> Session:
        return run_sync(self.end_session(session_id))

    def send_sync(self, session_id: str, text: str | None = None, **options: Any) -> Receipt:
        return run_sync(self.send(session_id, text, **options))

    def wait_sync(self, turn_id: str, timeout: float | None = None) -> Turn:
        return run_sync(self.wait(turn_id, timeout))

    def events_sync(self, session_id: str, after: int = 0, limit: int | None = None) -> list[Event]:
        return run_sync(self.events(session_id, after, limit))

    def cancel_sync(self, session_id: str) -> str | None:
        return run_sync(self.cancel(session_id))

    def input_sync(self, turn_id: str) -> AgentInput:
        return run_sync(self.input(turn_id))

    def subscribe_sync(
        self, session_id: str, to_session: str | None = None, to_agent: str | None = None
    ) -> str:
        return run_sync(self.subscribe(session_id, to_session, to_agent))

    def unsubscribe_sync(
        self, session_id: str, to_session: str | None = None, to_agent: str | None = None
    ) -> bool:
        return run_sync(self.unsubscribe(session_id, to_session, to_agent))

    # -- webhooks and schedules (turnkit.sessions.webhooks, .schedules) ------

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
        from turnkit.sessions.webhooks import define_webhook

        if id in self._webhooks:
            raise ValueError(f"app.webhook: a webhook {id!r} is already defined")
        self._webhooks[id] = define_webhook(self.agents, id, agent, secret, session_key)

    async def deliver_webhook(self, id: str, headers: Any, body: bytes) -> Any:
        """Verify one delivery to webhook ``id`` and store its input (a ``WebhookDelivery``)."""
        from turnkit.sessions.webhooks import deliver_webhook

        return await deliver_webhook(self, id, headers, body)

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
        from turnkit.sessions.schedules import define_schedule

        if id in self._schedules:
            raise ValueError(f"app.schedule: a schedule {id!r} is already defined")
        self._schedules[id] = define_schedule(
            self.agents, id, cron, agent, timezone, dispatch, overlap, session_key
        )

    async def run_schedules(self, now: Any) -> list[Any]:
        """Fire what is due at ``now`` (an aware datetime); a ``ScheduleFire`` per action."""
        from turnkit.sessions.schedules import run_schedules

        self._running()
        return await run_schedules(self, now)

    async def schedules(self, now: Any = None) -> list[Any]:
        """Each schedule with its next fire time after ``now`` (default: the real time)."""
        from turnkit.sessions.schedules import schedule_statuses, stamp_of, utc_now

        self._running()
        when = stamp_of(utc_now() if now is None else now)
        return await asyncio.to_thread(schedule_statuses, self, when)

    def run_schedules_sync(self, now: Any) -> list[Any]:
        return run_sync(self.run_schedules(now))

    # -- lookups for the server ----------------------------------------------

    async def find_session(self, agent: str, key: str) -> Session | None:
        """The session of ``agent`` with ``key``, or None; nothing is created."""
        core = self._running()
        key = check.check_key(key, "key")  # type: ignore[assignment]
        return await asyncio.to_thread(core.store._session_by_key, agent, key)

    async def get_turn(self, turn_id: str) -> Turn:
        """The turn as it is now (``TurnNotFoundError`` for an unknown id)."""
        return await asyncio.to_thread(self._running().store.turn, _id(turn_id, "turn_id"))

    # -- channels (turnkit.channels) -----------------------------------------

    def slack(
        self, agent: str, signing_secret: str, bot_token: str, api_url: str | None = None
    ) -> Any:
        """Talk to ``agent`` in Slack: mentions and direct messages, one session per thread.

        ``signing_secret`` checks requests at ``POST /channels/slack/events``;
        replies are posted with ``bot_token``; ``api_url`` is the Web API's
        base (tests point it at a fake). Returns the ``SlackChannel``.
        """
        from turnkit.channels.setup import add_channel

        secret, token = ("signing_secret", signing_secret), ("bot_token", bot_token)
        return add_channel(self, "slack", agent, secret, token, api_url)

    def linear(
        self, agent: str, webhook_secret: str, access_token: str, api_url: str | None = None
    ) -> Any:
        """Be ``agent`` in Linear's agent sessions (delegated or mentioned on issues).

        ``webhook_secret`` checks deliveries at ``POST /channels/linear/webhook``;
        activities are created with ``access_token`` (an OAuth token goes as
        Bearer, a ``lin_api_`` key as is) at ``api_url`` (the GraphQL
        endpoint). Returns the ``LinearChannel``.
        """
        from turnkit.channels.setup import add_channel

        secret, token = ("webhook_secret", webhook_secret), ("access_token", access_token)
        return add_channel(self, "linear", agent, secret, token, api_url)

    @property
    def channels(self) -> dict[str, Any]:
        """The configured channels, by provider (``"slack"``, ``"linear"``)."""
        return dict(self._channels)

    async def handle_channel(self, provider: str, headers: Any, body: bytes) -> Any:
        """Answer one request of a channel (``"slack"`` or ``"linear"``): its raw body and
        headers in, a ``ChannelResponse`` (status, JSON body) out. Signed requests only."""
        from turnkit.channels.base import problem

        self._running()
        channel = self._channels.get(provider)
        if channel is None:
            return problem(404, f"no {provider!r} channel is configured on this App")
        return await channel.handle(self, headers, body)

    def _start_channels(self, core: Any) -> None:
        if self._channels:
            from turnkit.channels.setup import start_delivery

            self._delivery = start_delivery(core, self._channels)

    async def _stop_channels(self) -> None:
        delivery, self._delivery = self._delivery, None
        if delivery is not None:
            if self._core is not None:
                self._core.store.on_reply_queued = None
            await delivery.stop()


def _id(value: object, field: str = "session_id") -> str:
    if type(value) is not str or not value:
        raise InvalidInputError(field, f"must be a non-empty string, got {value!r}")
    return value


def _seq(value: object) -> int:
    if type(value) is not int or value < 0:
        raise InvalidInputError("after", f"must be an int >= 0, got {value!r}")
    return value
