"""Running one turn: the agent loop, with a durable model and durable tools.

There is one agent loop in turnkit (:class:`turnkit.agent.loop.Turns`); a
turn hands it a model and a tool runner that are themselves durable:

- :class:`DurableModel` runs the agent's render before every model call
  (its return value is that call's system text; ``use_tool`` adds tools),
  then answers from the turn's recorded step if there is one, else calls
  the real model and records the reply.
- :meth:`TurnRunner._run_tool` records a call as started (``tool.started``)
  before it runs and its result after (``tool.finished``). A call found
  started but not finished was interrupted by a crash: it gets an error
  result, or runs again when its tool is ``idempotent``.

Messages are stored as the loop produces them, keyed by their place in the
turn, so the replay after a crash stores none of them twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from collections.abc import Callable
from typing import Any

from turnkit._sync import maybe_await
from turnkit.agent.loop import RunState, Turns
from turnkit.agent.output import OutputType
from turnkit.errors import TurnkitError
from turnkit.messages import Message, ToolResultBlock, ToolUseBlock, validate_blocks
from turnkit.messages._json import thaw
from turnkit.providers.base import Model, ModelRequest, ModelResponse, ModelSettings, Usage
from turnkit.sessions.ask import ASK, ask_tool, question_for
from turnkit.sessions.hooks import RenderScope, current_scope
from turnkit.sessions.records import Question
from turnkit.sessions.subagents import ToolCallScope, current_call
from turnkit.sessions.turnlog import Claim, Progress, TurnLog
from turnkit.tools import Tool, ToolInputError, execute_tool_call, gather_tools

__all__ = ["AgentDef", "RenderError", "TurnRunner"]


class RenderError(TurnkitError):
    """An agent's render function raised, or returned something other than text."""


class _Asked(Exception):
    """The model called ``ask``: the loop stops before its next model call."""


@dataclasses.dataclass(frozen=True, slots=True)
class AgentDef:
    """An agent of an App: its render function, model, tools and limits."""

    name: str
    render: Callable[[], Any]
    model: Model
    tools: dict[str, Tool]
    max_turns: int
    settings: ModelSettings
    sources: tuple[Any, ...] = ()  # tool sources (MCP servers), listed before each call
    output: OutputType | None = None
    output_retries: int = 1


class DurableModel(Model):
    """The agent's model as seen by one turn: rendered, recorded, replayed."""

    def __init__(self, run: _TurnRun) -> None:
        agent = run.agent
        self.provider, self.name = agent.model.provider, agent.model.name
        self._run = run
        self.tools: dict[str, Tool] = dict(agent.tools)
        self._calls = 0
        self.asked: Question | None = None  # set when the model calls ask
        self.ask_call: str | None = None

    async def _render(self) -> tuple[str | None, tuple[Any, ...]]:
        run = self._run
        agent = run.agent
        scope = RenderScope(run.claim.input, run.data, run.runner.app.tool_resolver(agent))
        token = current_scope.set(scope)
        try:
            system = await maybe_await(agent.render())
        except Exception as err:
            raise RenderError(f"render of agent {agent.name!r} raised {_describe(err)}") from err
        finally:
            current_scope.reset(token)
        if system is not None and not isinstance(system, str):
            raise RenderError(
                f"render of agent {agent.name!r} must return the system text (a str) "
                f"or None, got {type(system).__name__}"
            )
        offered = list(scope.offered)
        if agent.sources or scope.sources:
            offered += await gather_tools([*agent.sources, *scope.sources])
        current = dict(agent.tools)  # this call's tools: a clash is within one call only
        for tool in offered:
            known = current.get(tool.name)
            if known is not None and known is not tool and known != tool:
                raise RenderError(f"use_tool: two different tools are named {tool.name!r}")
            current[tool.name] = tool
        self.tools.update(current)  # sources list fresh Tool objects: the latest runs
        names = dict.fromkeys([*agent.tools, *(tool.name for tool in offered)])
        return system, tuple(self.tools[name].spec for name in names)

    def takes_output_schema(self, with_tools: bool) -> bool:
        return self._run.agent.model.takes_output_schema(with_tools)

    async def request(self, request: ModelRequest) -> ModelResponse:
        if self.asked is not None:
            raise _Asked(self.asked.id)
        system, specs = await self._render()
        # Tools the loop itself added (structured output's) stay; the rest come from the render.
        added = tuple(spec for spec in request.tools if spec.name not in self._run.agent.tools)
        request = dataclasses.replace(request, system=system, tools=(*specs, *added))
        key = f"model:{self._calls}"
        self._calls += 1
        run = self._run
        if run.claim.resumed:  # a replay: answer from the record while there is one
            recorded = await asyncio.to_thread(run.log.step, run.claim.turn_id, key)
            if recorded is not None:
                return _response_from(recorded.result)
        response = await run.agent.model.request(request)
        run.progress.steps.append((key, _response_dict(response)))
        return response


class _TurnRun:
    """One execution of one turn (a replay after a crash is another)."""

    def __init__(self, runner: TurnRunner, claim: Claim, agent: AgentDef) -> None:
        self.runner, self.claim, self.agent = runner, claim, agent
        self.log = runner.log
        self.data = claim.data  # use_session_data(): saved when the turn ends
        self.progress = Progress()
        self.model = DurableModel(self)
        self.index = 0  # messages produced so far (the input is 0)
        self.pending: list[ToolResultBlock] = []  # other results, held with a question

    def _write(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return asyncio.to_thread(fn, *args, **kwargs)

    async def run(self) -> None:
        turns = Turns(
            system=None,
            tools=self.model.tools,
            settings=self.agent.settings,
            max_turns=self.agent.max_turns,
            transform_context=None,
            convert_to_llm=None,
            run_tool=self._run_tool,
            output=self.agent.output,
            output_retries=self.agent.output_retries,
        )
        state = RunState(self.claim.turn_id, self.claim.history)
        try:
            async for event in turns.run(self.model, state, streaming=True):
                if event.type == "message":
                    self._produced(event.message)
        except asyncio.CancelledError:
            reason = self.runner.cancel_reason(self.claim.turn_id)
            if reason is None:
                raise  # the process is stopping: the turn resumes at the next start
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            await self._cancelled(state, reason)
            return
        await self._finish(state.result())

    def _produced(self, message: Message) -> None:
        model = self.model
        if model.asked is not None and message.role == "user":
            # The ask call's result is the answer, in the turn that answers it:
            # the other calls' results wait with the question.
            self.pending = [b for b in message.content if b.tool_use_id != model.ask_call]
            return
        self.index += 1
        self.progress.messages.append((self.index, message))

    async def _cancelled(self, state: RunState, reason: str) -> None:
        settled = state.settled()
        for index, message in enumerate(settled[self.index :], start=self.index + 1):
            self.progress.messages.append((index, message))
        await self._write(
            self.log.finish, self.claim, "cancelled", reason=reason, progress=self.progress.take()
        )

    async def _finish(self, result: Any) -> None:
        claim, log, model = self.claim, self.log, self.model
        if model.asked is not None:
            await self._write(
                log.finish_asking,
                claim,
                model.asked,
                model.ask_call,
                self.pending,
                self.data,
                self.progress.take(),
            )
            return
        usage = dataclasses.asdict(result.usage)
        status, reason = ("completed", None) if result.success else ("failed", _reason(result))
        output = result.output if result.success else None
        progress = self.progress.take()
        try:
            await self._write(
                log.finish,
                claim,
                status,
                output=output,
                error=result.error,
                reason=reason,
                data=self.data,
                usage=usage,
                progress=progress,
                output_data=result.output_data,
            )
        except (TypeError, ValueError) as err:  # the session data is not JSON
            error = f"use_session_data(): the session data is not JSON: {err}"
            await self._write(
                log.finish,
                claim,
                "failed",
                error=error,
                reason="invalid_session_data",
                progress=progress,
            )

    async def _run_tool(self, call: ToolUseBlock, tools: Any) -> ToolResultBlock:
        claim, log = self.claim, self.log
        if call.name == ASK and tools.get(ASK) is ask_tool():
            return self._ask(call)
        step = None
        if claim.resumed:
            step = await asyncio.to_thread(log.step, claim.turn_id, f"tool:{call.id}")
        if step is not None and step.status == "done":
            return validate_blocks([step.result])[0]  # type: ignore[return-value]
        if step is not None:  # started before a crash, never finished
            tool = tools.get(call.name)
            if tool is None or not tool.idempotent:
                block = ToolResultBlock(call.id, _interrupted(call.name), is_error=True)
                await self._write(log.finish_tool, claim.session_id, claim.turn_id, call, block)
                return block
        else:
            progress = self.progress.take()
            await self._write(log.start_tool, claim.session_id, claim.turn_id, call, progress)
        scope = ToolCallScope(self.runner.app, claim.session_id, claim.turn_id, call.id)
        token = current_call.set(scope)
        try:
            block = await execute_tool_call(call, tools)
        finally:
            current_call.reset(token)
        await self._write(log.finish_tool, claim.session_id, claim.turn_id, call, block)
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


class TurnRunner:
    """Runs the turns a workflow claims, and cancels them on request."""

    def __init__(self, log: TurnLog, app: Any) -> None:
        self.log = log
        self.app = app  # its agents, its tool names, and itself for subagent tools
        self._tasks: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = {}
        self._cancel_reasons: dict[str, str] = {}
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
        loop.call_soon_threadsafe(task.cancel)
        return True

    async def __call__(self, workflow_id: str, session_id: str) -> None:
        """The body of a turn workflow: claim a turn of the session and run it."""
        claim = await asyncio.to_thread(self.log.claim, session_id, workflow_id)
        if claim is None:
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks[claim.turn_id] = (asyncio.get_running_loop(), task)
        try:
            agent = self.app.agents.get(claim.agent)
            if agent is None:
                error = f"agent {claim.agent!r} is not defined in the App running this turn"
                await asyncio.to_thread(
                    self.log.finish, claim, "failed", error=error, reason="unknown_agent"
                )
                return
            await _TurnRun(self, claim, agent).run()
        finally:
            with self._lock:
                self._tasks.pop(claim.turn_id, None)
                self._cancel_reasons.pop(claim.turn_id, None)


def _interrupted(name: str) -> str:
    return (
        f"Tool call {name} was interrupted: the process running it stopped before it "
        "finished, and it was not run again because the tool is not marked idempotent."
    )


def _describe(err: BaseException) -> str:
    try:
        text = str(err)
    except Exception:
        text = "(unprintable)"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def _reason(result: Any) -> str:
    if result.stop_reason == "max_turns":
        return "max_turns"
    if isinstance(result.exception, RenderError):
        return "render_error"
    if result.exception is not None:
        return "model_error"
    return "error"


def _response_dict(response: ModelResponse) -> dict[str, Any]:
    return {
        "message": response.message.to_dict(),
        "usage": dataclasses.asdict(response.usage),
        "stop_reason": response.stop_reason,
        "raw_stop_reason": response.raw_stop_reason,
    }


def _response_from(data: dict[str, Any]) -> ModelResponse:
    return ModelResponse(
        Message.from_dict(data["message"]),
        Usage(**data["usage"]),
        data["stop_reason"],
        data.get("raw_stop_reason"),
    )
