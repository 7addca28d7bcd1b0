"""App: agents defined as render functions, and the durable sessions they run.

See SPEC section 7. ``async with app`` (or ``with app``) opens the database,
launches DBOS and starts running turns in this process; every method needs
it, and every public coroutine has a ``_sync`` twin with its signature.

The App is the façade: it checks arguments and hands them to the started
:class:`~turnkit.sessions.runtime.runtime.Runtime`. Extensions (the
channels) attach through :meth:`App.extend`; they and the server use the
public methods and :attr:`App.runtime`, never this class's private names.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncIterator
from typing import Any, Protocol

from turnkit._sync import run_sync
from turnkit.errors import InvalidInputError
from turnkit.messages import Message
from turnkit.sessions.app_sources import SourceMethods
from turnkit.sessions.app_sync import SyncTwins
from turnkit.sessions.db.inputs import NewInput
from turnkit.sessions.db.store import TurnEnded, Tx
from turnkit.sessions.definitions import Definitions
from turnkit.sessions.model import checks as check
from turnkit.sessions.model.executors import ExecutorInfo
from turnkit.sessions.model.inputs import AgentInput
from turnkit.sessions.model.live import LiveEvent
from turnkit.sessions.model.records import Event, Receipt, Session, Turn
from turnkit.sessions.runtime.runtime import DEFAULT_LEASE_S, DEFAULT_MAX_HOPS, Runtime, Settings

__all__ = ["MAX_LIST", "App", "Extension"]

MAX_LIST = 500
"""The most sessions ``list_sessions`` gives at once."""


def _executor_id(given: str | None) -> str:
    """The executor id in force: ``given`` (checked), else a new unique one."""
    from turnkit.sessions.runtime.executors import new_executor_id

    if given is None or given == "":
        return new_executor_id()
    if not isinstance(given, str):
        raise TypeError(f"App: executor_id must be a string, got {type(given).__name__}")
    if len(given) > 64 or not given.isprintable() or given != given.strip() or " " in given:
        raise ValueError(
            "App: executor_id (or $TURNKIT_EXECUTOR_ID) must be 1 to 64 printable "
            f"characters without spaces, got {given!r}"
        )
    return given


class Extension(Protocol):
    """Something that runs with an App (the channels are one): told of every turn's
    end in its transaction, started after the runtime opens, stopped before it closes."""

    def turn_ended(self, tx: Tx, ended: TurnEnded) -> None: ...

    def start(self, app: App) -> None: ...

    async def stop(self) -> None: ...


class App(SourceMethods, SyncTwins, Definitions):
    """Agents and their durable sessions, on one database.

    ``database_url``: ``sqlite:///path.db`` or ``postgresql://user:pw@host/db``;
    None reads ``$TURNKIT_DATABASE_URL``, else uses SQLite at
    ``./.turnkit/turnkit.db`` (created on first use). ``executor_id`` names
    this process to DBOS and to the other processes on the database (None:
    ``$TURNKIT_EXECUTOR_ID``, else a new unique id); it is held under a lease
    renewed every ``lease_seconds / 3``: when it lapses, a live process takes
    over this one's unfinished turns, and a process started with an id whose
    lease is still held waits for it to lapse (SPEC section 7, "Many processes");
    ``polling_interval`` is how often a process with a free slot looks for
    turns that waited for one, in seconds (only turns no process could start
    at once wait; a slot freed in the process that queued them takes them at
    once). ``max_running``: how many sessions run a turn here at once; more
    wait for any process with a free slot. ``workers=False`` runs no
    turns in this process (it sends, reads and follows; processes with
    workers run the turns). Every process that runs turns on a database must
    define the same agents. ``fire_schedules=False`` leaves firing schedules
    to other processes or to explicit ``run_schedules(now)`` calls (tests);
    by default a started App calls it at start and each minute.
    ``max_hops``: how long a chain of turn outcomes (subscriptions) and
    sub-agent tasks may grow from one outside input; past it the input is
    not created and the sending session records ``input.refused``.

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
        max_running: int = 8,
        max_hops: int = DEFAULT_MAX_HOPS,
        lease_seconds: float = DEFAULT_LEASE_S,
    ) -> None:
        if type(max_running) is not int or max_running < 1:
            raise ValueError(f"App: max_running must be an int >= 1, got {max_running!r}")
        if type(max_hops) is not int or max_hops < 1:
            raise ValueError(f"App: max_hops must be an int >= 1, got {max_hops!r}")
        if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)):
            raise ValueError(f"App: lease_seconds must be a number, got {lease_seconds!r}")
        if not 0.3 <= lease_seconds <= 3600:
            raise ValueError(f"App: lease_seconds must be 0.3 to 3600, got {lease_seconds!r}")
        super().__init__()
        executor = _executor_id(executor_id or os.environ.get("TURNKIT_EXECUTOR_ID"))
        self._settings = Settings(
            database_url,
            executor,
            polling_interval,
            workers,
            max_running,
            max_hops,
            float(lease_seconds),
        )
        self._runtime: Runtime | None = None
        self._webhooks: dict[str, Any] = {}
        self._schedules: dict[str, Any] = {}
        self._fire_schedules = fire_schedules
        self._ticker: Any = None
        self._extensions: list[Extension] = []

    # -- lifecycle -----------------------------------------------------------

    def extend(self, extension: Extension) -> None:
        """Run ``extension`` with this App (before it starts)."""
        if self._runtime is not None:
            raise RuntimeError("extend the App before it starts")
        self._extensions.append(extension)

    async def start(self) -> None:
        """Open the database and run turns in this process (``async with app`` calls it)."""
        if self._runtime is not None:
            raise RuntimeError("this App is already started")
        runtime = Runtime(self, self._settings, self._extensions)
        await asyncio.to_thread(runtime.open)
        self._runtime = runtime
        if self._fire_schedules:
            from turnkit.sessions.sources.schedules import ScheduleTicker

            self._ticker = ScheduleTicker(self.run_schedules, lambda: bool(self._schedules))
        for extension in self._extensions:
            extension.start(self)

    async def stop(self) -> None:
        """Stop running turns here; unfinished ones resume at the next start."""
        for extension in reversed(self._extensions):
            await extension.stop()
        ticker, self._ticker = self._ticker, None
        if ticker is not None:
            await ticker.stop()
        runtime, self._runtime = self._runtime, None
        if runtime is not None:
            await asyncio.to_thread(runtime.close)

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

    @property
    def runtime(self) -> Runtime:
        """The started App's running parts (for extensions and the server)."""
        if self._runtime is None:
            raise RuntimeError("the App is not started: use `async with app:` (or `with app:`)")
        return self._runtime

    @property
    def started(self) -> bool:
        """Whether the App is started (between ``start`` and ``stop``)."""
        return self._runtime is not None

    @property
    def executor_id(self) -> str:
        """The id this process runs turns under."""
        return self._settings.executor_id

    @property
    def runs_turns(self) -> bool:
        """Whether this process runs turns (``workers=True``)."""
        return self._settings.workers

    def set_workers(self, workers: bool) -> None:
        """Run turns in this process or not (before it starts; ``serve --no-turns``)."""
        if self._runtime is not None:
            raise RuntimeError("set_workers before the App starts")
        self._settings = dataclasses.replace(self._settings, workers=bool(workers))

    @property
    def database_url(self) -> str:
        """The database this App uses (the argument, ``$TURNKIT_DATABASE_URL``, or SQLite)."""
        from turnkit.sessions.db.engines import resolve_url

        return resolve_url(self._settings.database_url)

    async def executors(self) -> list[ExecutorInfo]:
        """Every executor id on this database: who holds it, its lease, what it runs."""
        return await asyncio.to_thread(self.runtime.executors)

    # -- sessions ------------------------------------------------------------

    async def create_session(
        self, agent: str, key: str | None = None, data: dict[str, Any] | None = None
    ) -> Session:
        """A new session of ``agent``; with a ``key``, the existing one of that key if any."""
        session, _ = await self.open_session(agent, key, data)
        return session

    async def open_session(
        self, agent: str, key: str | None = None, data: dict[str, Any] | None = None
    ) -> tuple[Session, bool]:
        """As :meth:`create_session`, and whether the session is new (one transaction)."""
        runtime = self.runtime
        self.agent_named(agent)
        key = check.check_key(key, "key")
        values = check.check_data(data)
        return await asyncio.to_thread(runtime.open_session, agent, key, values)

    async def get_session(self, session_id: str) -> Session:
        return await asyncio.to_thread(self.runtime.store.session, check.check_id(session_id))

    async def find_session(self, agent: str, key: str) -> Session | None:
        """The session of ``agent`` with ``key``, or None; nothing is created."""
        runtime = self.runtime
        agent = check.check_id(agent, "agent")
        key = check.check_key(key, "key")  # type: ignore[assignment]
        return await asyncio.to_thread(runtime.store.find_session, agent, key)

    async def list_sessions(
        self,
        agent: str | None = None,
        status: str | None = None,
        limit: int = 50,
        before: str | None = None,
    ) -> list[Session]:
        """Sessions, newest first: of ``agent`` and in ``status`` when given, at most
        ``limit`` (1 to 500), older than session ``before`` (the last id of the
        previous page) when given."""
        from turnkit.sessions.db.session_list import list_sessions

        store = self.runtime.store
        if agent is not None and (type(agent) is not str or agent not in self.agents):
            known = ", ".join(sorted(self.agents)) or "none"
            raise InvalidInputError("agent", f"no agent named {agent!r}; known: {known}")
        state = None if status is None else check.check_session_status(status)
        if type(limit) is not int or not 1 <= limit <= MAX_LIST:
            raise InvalidInputError("limit", f"must be an int from 1 to {MAX_LIST}, got {limit!r}")
        if before is not None:
            check.check_id(before, "before")
        return await asyncio.to_thread(list_sessions, store, agent, state, limit, before)

    async def fork_session(
        self, session_id: str, at: int | None = None, key: str | None = None
    ) -> Session:
        """A new session of the same agent whose conversation is a copy of the first
        ``at`` messages of this one (None: all); see :meth:`open_fork`."""
        session, _ = await self.open_fork(session_id, at, key)
        return session

    async def open_fork(
        self, session_id: str, at: int | None = None, key: str | None = None
    ) -> tuple[Session, bool]:
        """As :meth:`fork_session`, and whether the fork is new: a ``key`` that already
        names a fork of this session (at this ``at``) gives that fork back; any other
        session's key, an ``at`` past the end or between a tool call and its result
        (or thinking and its reply) raise :class:`~turnkit.InvalidInputError`."""
        from turnkit.sessions.db.forks import fork_session

        store = self.runtime.store
        source = check.check_id(session_id)
        if at is not None and (type(at) is not int or at < 0):
            raise InvalidInputError("at", f"must be an int >= 0 or None, got {at!r}")
        key = check.check_key(key, "key")
        return await asyncio.to_thread(fork_session, store, source, at, key)

    async def history(self, session_id: str) -> list[Message]:
        """The session's durable conversation, oldest first."""
        store = self.runtime.store
        await asyncio.to_thread(store.session_agent, check.check_id(session_id))
        return list(await asyncio.to_thread(store.history, session_id))

    async def end_session(self, session_id: str) -> Session:
        """End the session: queued turns are cancelled, the running one too; sends then raise."""
        runtime = self.runtime
        await asyncio.to_thread(runtime.end_session, check.check_id(session_id))
        return await asyncio.to_thread(runtime.store.session, session_id)

    async def send(
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
        """Give the session an input; it is durable when this returns.

        ``on_busy`` says what it does if a turn of the session is running:
        ``"queue"``, ``"steer"``, ``"interrupt"`` or ``"merge"`` (None: the
        agent's ``on_busy``); the receipt's ``status`` says what happened.
        """
        runtime = self.runtime
        new = NewInput(
            check.check_source(source),
            check.check_text(text),
            check.check_payload(payload),
            {},
            check.check_key(idempotency_key, "idempotency_key"),
            check.check_key(answers, "answers", check.MAX_ID_CHARS),
            on_busy=check.check_on_busy(on_busy),
        )
        if not new.text and new.payload_json == "null":
            raise InvalidInputError("text", "an input needs text or a payload; both are empty")
        channel_dict = check.check_channel(channel)
        if channel_dict is not None:
            new.details["channel"] = channel_dict
        return await asyncio.to_thread(runtime.accept, check.check_id(session_id), new)

    async def approve(self, session_id: str, decisions: Any, reason: str | None = None) -> Receipt:
        """Decide the tool calls that wait for approval in the session's open question.

        ``decisions`` is True or False for every waiting call, or ``{call_id:
        True | False | Approval}`` with a decision for each (an ``Approval``'s
        ``input`` runs the call with that input, checked against the tool's
        schema first); ``reason`` goes with each decision that has none (a
        denied call's result gives it to the model). It sends an input that
        answers the question (``answer.value`` ``approve``, ``deny`` or
        ``mixed``); its turn runs the approved calls. Raises
        :class:`~turnkit.errors.NoApprovalOpenError` when no calls wait, and
        :class:`~turnkit.errors.InvalidInputError` naming the call for an
        unknown or missing call id or a refused input: nothing is stored.

        >>> app.approve_sync(session.id, {"call_1": True})  # doctest: +SKIP
        """
        from turnkit.sessions.db.approvals import approve

        runtime = self.runtime
        session_id = check.check_id(session_id)
        checked = check.check_decisions(decisions)
        if reason is not None and (type(reason) is not str or not reason.strip()):
            raise InvalidInputError("reason", f"must be a non-empty string or None, got {reason!r}")
        reason = check.check_text(reason, "reason")
        agent, _ = await asyncio.to_thread(runtime.store.session_agent, session_id)
        tools = self.agent_named(agent).tools if agent in self.agents else {}

        def tool_named(name: str) -> Any:
            return tools.get(name) or self.tools.get(name)

        return await asyncio.to_thread(
            approve, runtime.store, session_id, checked, reason, tool_named
        )

    async def wait(self, turn_id: str, timeout: float | None = None) -> Turn:
        """The turn once it is terminal; ``TimeoutError`` after ``timeout`` seconds."""
        return await self.runtime.wait_turn(check.check_id(turn_id, "turn_id"), timeout)

    async def get_turn(self, turn_id: str) -> Turn:
        """The turn as it is now (``TurnNotFoundError`` for an unknown id)."""
        return await asyncio.to_thread(self.runtime.store.turn, check.check_id(turn_id, "turn_id"))

    async def input(self, turn_id: str) -> AgentInput:
        """The input a turn runs on."""
        return (await self.get_turn(turn_id)).input

    async def events(
        self, session_id: str, after: int = 0, limit: int | None = None
    ) -> list[Event]:
        """The session's events with ``seq`` above ``after``, oldest first."""
        store = self.runtime.store
        session_id, after = check.check_id(session_id), check.check_seq(after)
        return await asyncio.to_thread(store.events, session_id, after, check.check_limit(limit))

    async def follow(
        self, session_id: str, after: int = 0, live: bool = False
    ) -> AsyncIterator[Event | LiveEvent]:
        """Every event after ``after``, then each new one as it is written (any process).

        Ends once the session has ended and its last event was given. With
        ``live=True`` it also yields :class:`LiveEvent` deltas while a model
        call streams (never stored; the durable ``message`` follows them);
        a follower that does not keep up with them is dropped with
        :class:`~turnkit.errors.SlowFollowerError`.
        """
        runtime = self.runtime
        session_id, after = check.check_id(session_id), check.check_seq(after)
        if not live:
            async for event in runtime.follow(session_id, after):
                yield event
            return
        from turnkit.sessions.runtime.live_follow import follow_live

        async def read(after: int, limit: int) -> list[Any]:
            return await asyncio.to_thread(runtime.store.event_rows, session_id, after, limit)

        durable = runtime.follow(session_id, after)
        async for item in follow_live(runtime.live, session_id, after, durable, read):
            yield item

    async def cancel(self, session_id: str) -> str | None:
        """Cancel the session's running turn (reason ``cancelled``); its id, or None."""
        runtime = self.runtime
        running = await asyncio.to_thread(
            runtime.cancel_running, check.check_id(session_id), "cancelled"
        )
        return running[0] if running else None

    async def subscribe(
        self, session_id: str, to_session: str | None = None, to_agent: str | None = None
    ) -> str:
        """Deliver each terminal turn of ``to_session`` (or of any session of
        ``to_agent``) to ``session_id`` as an ``event`` input; the subscription's id."""
        from turnkit.sessions.sources.subscriptions import subscribe

        store = self.runtime.store
        to_session, to_agent = self._watched(to_session, to_agent)
        return await asyncio.to_thread(
            subscribe, store, check.check_id(session_id), to_session, to_agent
        )

    async def unsubscribe(
        self, session_id: str, to_session: str | None = None, to_agent: str | None = None
    ) -> bool:
        """Stop a subscription; whether there was one."""
        from turnkit.sessions.sources.subscriptions import unsubscribe

        store = self.runtime.store
        to_session, to_agent = self._watched(to_session, to_agent)
        return await asyncio.to_thread(
            unsubscribe, store, check.check_id(session_id), to_session, to_agent
        )

    def _watched(self, to_session: object, to_agent: object) -> tuple[str | None, str | None]:
        if (to_session is None) == (to_agent is None):
            raise InvalidInputError("to_session", "give exactly one of to_session and to_agent")
        if to_agent is not None:
            self.agent_named(to_agent)
        if to_session is not None:
            check.check_id(to_session, "to_session")
        return to_session, to_agent  # type: ignore[return-value]
