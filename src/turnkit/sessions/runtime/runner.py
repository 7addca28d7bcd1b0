"""Running turns: a session's runner claims its turns one by one and runs each.

There is one agent loop in turnkit (:class:`turnkit.agent.loop.AgentLoop`); a
turn hands it a :class:`~.durable.DurableModel` and a tool runner that are
themselves durable. :meth:`TurnExecution._run_tool` records a call as
started (``tool.started``) before it runs and its result after
(``tool.finished``); a call found started but not finished was interrupted
by a crash: it gets an error result, or runs again when its tool is
``idempotent``. Messages are stored as the loop produces them, keyed by
their place in the turn, so the replay after a crash stores none twice.

Every turn ends. Whatever happens inside one (an exception of any kind, a
``CancelledError`` nobody asked for, a value the database refuses), the
worker ends it ``failed`` with a reason and an error, in a last write that
carries nothing but that: the session goes on with its next input. Only a
process that is stopping leaves a turn running, to resume at the next start.
A turn's end, once begun, is written whole even if a cancel lands meanwhile.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from turnkit._values import dumps
from turnkit.agent.loop import AgentLoop, RunState
from turnkit.errors import InvalidInputError
from turnkit.messages import Message, ToolResultBlock, ToolUseBlock, thaw, validate_blocks
from turnkit.sessions.db.executors import LeaseLost
from turnkit.sessions.db.steps import Claim, Ending, Journal, PendingWrites, tool_step_key
from turnkit.sessions.db.store import queued_key
from turnkit.sessions.model.checks import check_payload
from turnkit.sessions.model.status import TurnState
from turnkit.sessions.render.ask import ASK, ask_tool, question_for
from turnkit.sessions.runtime.approving import decided_start, held_question, is_partial_answer
from turnkit.sessions.runtime.compacting import TurnCompaction
from turnkit.sessions.runtime.conversions import KeptConversions
from turnkit.sessions.runtime.durable import DurableModel, RenderError, describe_error
from turnkit.sessions.runtime.lingering import Lingerers
from turnkit.sessions.runtime.live import LiveHub
from turnkit.sessions.runtime.live_publish import TurnLive
from turnkit.sessions.runtime.steering import TurnSteering
from turnkit.sessions.sources.subagents import ToolCallScope, current_call
from turnkit.tools import ToolInputError, execute_tool_call

if TYPE_CHECKING:
    from turnkit.sessions.definitions import AgentDef, Definitions
    from turnkit.sessions.runtime.notify import Notifier

__all__ = ["TurnExecution", "TurnWorker"]

Delegate = Callable[..., Awaitable[str]]
log = logging.getLogger("turnkit.sessions")

# A turn's last-resort end is retried while the database cannot take it (it is down):
# the session goes on as soon as it can.
END_RETRY_FIRST_S = 0.5
END_RETRY_MAX_S = 30.0


def _stopping() -> bool:
    """Whether the running task was cancelled by someone (the process stopping)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _settle(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a worker thread, awaited to its end even through a cancel:
    a turn's end is written whole or not at all, and its caller learns which.
    A cancel that landed meanwhile is raised again afterwards."""
    future = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    cancelled = False
    while True:
        try:
            result = await asyncio.shield(future)
            break
        except asyncio.CancelledError:
            if future.done():  # the write ended (or was itself cancelled: the loop is closing)
                if future.cancelled():
                    raise
                result = future.result()
                break
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError
    return result


class TurnExecution:
    """One execution of one turn (a replay after a crash is another)."""

    def __init__(self, worker: TurnWorker, claim: Claim, agent: AgentDef) -> None:
        self.worker, self.claim, self.agent = worker, claim, agent
        self.journal = worker.journal
        self.data = claim.data  # use_session_data(): saved when the turn ends
        self.pending = PendingWrites()
        resolve = worker.definitions.tool_resolver(agent)
        self.model = DurableModel(agent, claim, self.data, resolve, self.journal, self.pending)
        self.compacting = TurnCompaction.of(
            agent, claim, self.journal, self.pending, lambda: self.model.asked is not None
        )
        if self.compacting is not None:  # what the loop compacted is stored before the call
            self.model.before_call = self.compacting.store_new
        steering = TurnSteering(
            self.journal, claim, self.pending, lambda: self.index + 1, self._steered
        )
        self.model.steer = steering.before_call
        self.state: RunState | None = None
        if worker.live is not None:  # the model calls stream to live followers
            self.model.live = TurnLive(worker.live, self.journal, claim, self.pending)
        self.index = 0  # messages produced so far (the input is 0)
        self.first = 1  # the turn_index of the run's first message (0: no input of its own)
        self.held_results: list[ToolResultBlock] = []  # other results, held with a question
        self.reply: Message | None = None  # the model's latest reply (its calls may be held)

    async def run(self) -> Claim | None:
        """Run the turn to its end; the runner's next claim (made with the end), or None."""
        agent_loop = AgentLoop(
            system=None,
            tools=self.model.tools,
            settings=self.agent.settings,
            max_turns=self.agent.max_turns,
            transform_context=None,
            convert_to_llm=None,
            run_tool=self._run_tool,
            output=self.agent.output,
            output_retries=self.agent.output_retries,
            compaction=None if self.compacting is None else self.compacting.settings,
            conversion=self.worker.conversions.of(self.claim.session_id),
        )
        try:
            history, decisions = await decided_start(
                self.claim, self.model, self.worker.definitions
            )
        except RenderError as err:  # the render that offers the approved calls' tools
            ending = Ending(TurnState.FAILED, error=str(err), reason="render_error")
            self.worker.ending(self.claim.turn_id)
            return await self._end(self.journal.finish, self.claim, ending, None)
        state = self.state = RunState(self.claim.turn_id, history)
        if decisions is not None:  # the answer to the held calls is the turn's message 0
            state.decisions, self.index, self.first = decisions, -1, 0
            if not decisions:  # every edit was refused: the start's answer is whole already
                self._produced(history[-1])
        if self.compacting is not None:
            await self.compacting.watch(state)
        try:
            async for event in agent_loop.run(self.model, state, streaming=True):
                if event.type == "message":
                    self._produced(event.message)
        except asyncio.CancelledError:
            reason = self.worker.cancel_reason(self.claim.turn_id)
            if reason is None:
                raise  # stopping (or nobody's cancel: the worker fails the turn)
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            self.worker.ending(self.claim.turn_id)
            return await self._cancelled(state, reason)
        self.worker.ending(self.claim.turn_id)  # a cancel from now on would cut the end short
        return await self._finish(state.result())

    def _produced(self, message: Message) -> None:
        model = self.model
        if message.role == "user" and (
            model.asked is not None or is_partial_answer(self.reply, message)
        ):
            # The ask call's result is the answer, in the turn that answers it (and
            # held calls' results, in the turn that decides them): the other
            # calls' results wait with the question.
            self.held_results = [b for b in message.content if b.tool_use_id != model.ask_call]
            return
        if message.role == "assistant":
            self.reply = message
        self.index += 1
        self.pending.messages.append((self.index, message))

    def _steered(self, message: Message) -> None:
        """Inputs steered into the turn joined it (stored as its next message)."""
        assert self.state is not None
        self.state.added.append(message)
        self.index += 1

    def _write(self, fn: Callable[..., Any], *args: Any) -> Awaitable[Any]:
        return asyncio.to_thread(fn, *args)

    def _end(self, fn: Callable[..., Any], *args: Any) -> Awaitable[Any]:
        return _settle(fn, *args)

    async def _cancelled(self, state: RunState, reason: str) -> Claim | None:
        settled = state.settled()
        stored = self.index + 1 - self.first  # of the run's messages (its input is not one)
        for index, message in enumerate(settled[stored:], start=self.index + 1):
            self.pending.messages.append((index, message))
        ending = Ending(TurnState.CANCELLED, reason=reason)
        return await self._end(self.journal.finish, self.claim, ending, self.pending.take())

    async def _finish(self, result: Any) -> Claim | None:
        claim, model = self.claim, self.model
        try:  # checked as create_session checks it: JSON, bounded in depth and size
            data_json = check_payload(self.data, field="use_session_data()")
        except (InvalidInputError, TypeError, ValueError) as err:
            error = f"the session data cannot be saved: {err}"
            ending = Ending(TurnState.FAILED, error=error, reason="invalid_session_data")
            return await self._end(self.journal.finish, claim, ending, self.pending.take())
        if result.success and result.approvals:  # calls wait for a person's decision
            question, resume = held_question(claim, result, self.held_results, model.ask_call)
            return await self._end(
                self.journal.finish_asking, claim, question, resume, data_json, self.pending.take()
            )
        if model.asked is not None:
            resume = {
                "call_id": model.ask_call,
                "results": [block.to_dict() for block in self.held_results],
            }
            pending = self.pending.take()
            return await self._end(
                self.journal.finish_asking, claim, model.asked, resume, data_json, pending
            )
        if result.success:
            ending = Ending(
                TurnState.COMPLETED,
                output=result.output,
                usage=dataclasses.asdict(result.usage),
                output_data_json=_output_json(result.output_data),
                data_json=data_json,
            )
        else:
            ending = Ending(
                TurnState.FAILED,
                error=result.error,
                reason=_reason(result),
                usage=dataclasses.asdict(result.usage),
                data_json=data_json,
            )
        return await self._end(self.journal.finish, claim, ending, self.pending.take())

    async def _run_tool(self, call: ToolUseBlock, tools: Any) -> ToolResultBlock:
        claim, journal = self.claim, self.journal
        if call.name == ASK and tools.get(ASK) is ask_tool():
            return self._ask(call)
        step = None
        if claim.resumed:
            step = await asyncio.to_thread(journal.step, claim.turn_id, tool_step_key(call.id))
        if step is not None and step.status == "done":
            return validate_blocks([step.result])[0]  # type: ignore[return-value]
        if step is not None:  # started before a crash, never finished
            tool = tools.get(call.name)
            if tool is None or not tool.idempotent:
                block = ToolResultBlock(call.id, _interrupted(call.name), is_error=True)
                await self._write(journal.finish_tool, claim.session_id, claim.turn_id, call, block)
                return block
        else:
            pending = self.pending.take()
            await self._write(journal.start_tool, claim.session_id, claim.turn_id, call, pending)
        scope = ToolCallScope(
            self.worker.delegate, claim.session_id, claim.turn_id, call.id, claim.input.hops
        )
        token = current_call.set(scope)
        try:
            block = await execute_tool_call(call, tools)
        except asyncio.CancelledError:
            if _stopping() or self.worker.cancel_reason(claim.turn_id) is not None:
                raise
            # The tool's own (it re-raised a cancellation of a task it awaited):
            # a failed call like any other, not the end of the turn.
            block = ToolResultBlock(call.id, _cancelled_itself(call.name), is_error=True)
        finally:
            current_call.reset(token)
        await self._write(journal.finish_tool, claim.session_id, claim.turn_id, call, block)
        return block

    def _ask(self, call: ToolUseBlock) -> ToolResultBlock:
        try:
            arguments = ask_tool().check_input(thaw(call.input))
        except ToolInputError as err:
            return ToolResultBlock(call.id, f"Invalid input for tool 'ask': {err}", is_error=True)
        model = self.model
        model.asked = question_for(self.claim.turn_id, call, arguments)
        model.ask_call = call.id
        return ToolResultBlock(call.id, "(waiting for the answer)")


class TurnWorker:
    """Runs the turns a session's runner claims, and cancels them on request."""

    def __init__(
        self,
        journal: Journal,
        definitions: Definitions,
        delegate: Delegate,
        notifier: Notifier | None = None,
        may_linger: Callable[[], bool] = lambda: False,
    ) -> None:
        self.journal = journal
        self.notifier = notifier  # wakes a runner waiting for its session's next input
        # Runners keeping their idle session a moment (may_linger: no runner here
        # waits for a slot).
        self.lingerers = Lingerers(journal, notifier, may_linger)
        self.definitions = definitions  # the agents, and what use_tool(name) offers
        self.delegate = delegate  # what a subagent tool call does (Runtime.delegate)
        self.conversions = KeptConversions()  # each session's, from one turn to the next
        self.live: LiveHub | None = None  # where the model calls' live deltas go
        self._tasks: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = {}
        self._cancel_reasons: dict[str, str] = {}
        self._ending: set[str] = set()  # turns writing their end: past cancelling
        self._lock = threading.Lock()

    @property
    def local_turns(self) -> list[str]:
        return list(self._tasks)

    def cancel_reason(self, turn_id: str) -> str | None:
        return self._cancel_reasons.get(turn_id)

    def cancel(self, turn_id: str, reason: str) -> bool:
        """Cancel ``turn_id`` if it runs in this process (from any thread)."""
        with self._lock:
            found = self._tasks.get(turn_id)
            if found is None:
                return False
            if turn_id in self._cancel_reasons:
                return True  # already asked: a second cancel would hit the cleanup
            self._cancel_reasons[turn_id] = reason
        loop, task = found
        loop.call_soon_threadsafe(self._cancel_on_loop, turn_id, task)
        return True

    def ending(self, turn_id: str) -> None:
        """The turn is writing its end (on its loop): a cancel now changes nothing."""
        self._ending.add(turn_id)

    def _cancel_on_loop(self, turn_id: str, task: asyncio.Task[Any]) -> None:
        # On the turn's own loop, so this sees the turn as its task does: still
        # running it (not already ending it, nor on to the next turn).
        with self._lock:
            current = self._tasks.get(turn_id)
        if current is not None and current[1] is task and turn_id not in self._ending:
            task.cancel()

    async def run_session(self, runner_id: str, session_id: str) -> None:
        """The body of a session's runner: claim its turns one by one and run each.

        Each turn's end claims the next one in the same transaction, so a busy
        session costs no extra write between its turns. When nothing is
        queued, the runner may keep the session a moment (:mod:`.lingering`).
        """
        what = f"claim the next turn of {session_id}"
        claim = await _retrying(what, self.journal.claim, session_id, runner_id)
        if self.notifier is None:
            while claim is not None:
                claim = await self._run_turn(claim)
            return
        with self.notifier.watching(queued_key(session_id)) as queued:
            while claim is not None:
                seen = queued.version()
                claim = await self._run_turn(claim)
                if claim is None and self.lingerers.kept(runner_id):
                    claim = await self.lingerers.linger(
                        runner_id,
                        queued,
                        seen,
                        lambda keep: _retrying(
                            what, self.journal.claim, session_id, runner_id, keep
                        ),
                    )
                else:
                    self.lingerers.forget(runner_id)

    async def _fail(self, claim: Claim, err: BaseException) -> Claim | None:
        """End ``claim`` ``failed`` after ``err`` escaped it; the runner's next claim.

        First with what the turn produced; if the database refuses that, with
        nothing but the failure (a write that cannot fail for the same
        cause), retried while the database is unreachable.
        """
        log.error("turnkit: turn %s failed inside turnkit", claim.turn_id, exc_info=err)
        error = f"the turn stopped on an unexpected {describe_error(err)}"
        ending = Ending(TurnState.FAILED, error=error, reason="internal_error")
        self.ending(claim.turn_id)
        try:
            return await _settle(self.journal.finish, claim, ending)
        except Exception as first:  # the end itself was refused: say so, and keep it bare
            error = f"{error}; writing the turn's end failed too: {describe_error(first)}"
            bare = Ending(TurnState.FAILED, error=error, reason="storage_error")
        await _retrying(f"end turn {claim.turn_id}", self.journal.finish, claim, bare, None, False)
        return await _retrying(
            f"claim the next turn of {claim.session_id}",
            self.journal.claim,
            claim.session_id,
            claim.runner_id,
        )

    async def _run_turn(self, claim: Claim) -> Claim | None:
        task = asyncio.current_task()
        assert task is not None
        with self._lock:
            self._tasks[claim.turn_id] = (asyncio.get_running_loop(), task)
        try:
            agent = self.definitions.agents.get(claim.agent)
            if agent is None:
                error = f"agent {claim.agent!r} is not defined in the App running this turn"
                ending = Ending(TurnState.FAILED, error=error, reason="unknown_agent")
                return await asyncio.to_thread(self.journal.finish, claim, ending)
            return await TurnExecution(self, claim, agent).run()
        except BaseException as err:
            # Only a cancel of this task means the process is stopping. A SystemExit
            # or KeyboardInterrupt raised in here is a tool's or a render's (signals
            # reach the main thread, not this loop): it fails the turn, since raised
            # on it would stop the loop every session of this process runs on.
            if isinstance(err, asyncio.CancelledError) and _stopping():
                raise  # the process is stopping: the turn resumes at the next start
            if isinstance(err, LeaseLost):
                raise  # another process runs the turn now: write nothing more
            return await self._fail(claim, err)
        finally:
            with self._lock:
                self._tasks.pop(claim.turn_id, None)
                self._cancel_reasons.pop(claim.turn_id, None)
                self._ending.discard(claim.turn_id)


async def _retrying(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` off the loop, retried with a growing pause while it raises
    (the database is unreachable): a session's runner outlasts an outage."""
    delay = END_RETRY_FIRST_S
    while True:
        try:
            return await _settle(fn, *args)
        except Exception as err:
            log.warning("turnkit: cannot %s yet (retrying in %.1f s): %s", what, delay, err)
        await asyncio.sleep(delay)
        delay = min(delay * 2, END_RETRY_MAX_S)


def _interrupted(name: str) -> str:
    return (
        f"Tool call {name} was interrupted: the process running it stopped before it "
        "finished, and it was not run again because the tool is not marked idempotent."
    )


def _cancelled_itself(name: str) -> str:
    return (
        f"Tool {name} raised CancelledError although the turn was not cancelled "
        "(a task it awaited was cancelled); it is treated as a failed call."
    )


def _reason(result: Any) -> str:
    if result.stop_reason in ("max_turns", "context_too_long"):
        return result.stop_reason
    if isinstance(result.exception, RenderError):
        return "render_error"
    if result.exception is not None:
        return "model_error"
    return "error"


def _output_json(value: Any) -> str | None:
    """Structured output as stored JSON (a model or dataclass instance as its fields)."""
    if value is None:
        return None
    import pydantic_core

    return dumps(json.loads(pydantic_core.to_json(value)))
