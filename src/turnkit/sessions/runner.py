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
import inspect
import threading
from collections.abc import Callable
from typing import Any

from turnkit.agent.loop import RunState, Turns
from turnkit.errors import TurnkitError
from turnkit.messages import Message, ToolResultBlock, ToolUseBlock, validate_blocks
from turnkit.messages._json import thaw
from turnkit.providers.base import Model, ModelRequest, ModelResponse, ModelSettings, Usage
from turnkit.sessions.ask import ASK, ask_tool, question_for
from turnkit.sessions.hooks import RenderScope, current_scope
from turnkit.sessions.records import Question
from turnkit.sessions.turnlog import Claim, TurnLog
from turnkit.tools import Tool, ToolInputError, execute_tool_call

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


class DurableModel(Model):
    """The agent's model as seen by one turn: rendered, recorded, replayed."""

    def __init__(self, runner: TurnRunner, claim: Claim, agent: AgentDef, scope_data: dict) -> None:
        self.provider, self.name = agent.model.provider, agent.model.name
        self._runner, self._claim, self._agent = runner, claim, agent
        self.data = scope_data
        self.tools: dict[str, Tool] = dict(agent.tools)
        self._calls = 0
        self.asked: Question | None = None  # set when the model calls ask
        self.ask_call: str | None = None

    async def _render(self) -> tuple[str | None, tuple[Any, ...]]:
        scope = RenderScope(self._claim.input, self.data, self._runner.resolve_tool(self._agent))
        token = current_scope.set(scope)
        try:
            system = self._agent.render()
            if inspect.isawaitable(system):
                system = await system
        except Exception as err:
            raise RenderError(
                f"render of agent {self._agent.name!r} raised {_describe(err)}"
            ) from err
        finally:
            current_scope.reset(token)
        if system is not None and not isinstance(system, str):
            raise RenderError(
                f"render of agent {self._agent.name!r} must return the system text (a str) "
                f"or None, got {type(system).__name__}"
            )
        for tool in scope.offered:
            known = self.tools.get(tool.name)
            if known is not None and known is not tool and known != tool:
                raise RenderError(f"use_tool: two different tools are named {tool.name!r}")
            self.tools[tool.name] = tool
        names = dict.fromkeys([*self._agent.tools, *(tool.name for tool in scope.offered)])
        return system, tuple(self.tools[name].spec for name in names)

    async def request(self, request: ModelRequest) -> ModelResponse:
        if self.asked is not None:
            raise _Asked(self.asked.id)
        system, specs = await self._render()
        request = dataclasses.replace(request, system=system, tools=specs)
        key = f"model:{self._calls}"
        self._calls += 1
        log, turn_id = self._runner.log, self._claim.turn_id
        recorded = await asyncio.to_thread(log.step, turn_id, key)
        if recorded is not None:
            return _response_from(recorded.result)
        response = await self._agent.model.request(request)
        await asyncio.to_thread(log.record_step, turn_id, key, _response_dict(response))
        return response


class TurnRunner:
    """Runs the turns a workflow claims, and cancels them on request."""

    def __init__(self, log: TurnLog, agents: dict[str, AgentDef], resolve_tool: Callable) -> None:
        self.log = log
        self.agents = agents
        self.resolve_tool = resolve_tool  # (agent) -> (name or tool) -> [Tool]
        self._tasks: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]]] = {}
        self._cancel_reasons: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def local_turns(self) -> list[str]:
        return list(self._tasks)

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
            await self._run(claim)
        finally:
            self._tasks.pop(claim.turn_id, None)
            self._cancel_reasons.pop(claim.turn_id, None)

    async def _run(self, claim: Claim) -> None:
        agent = self.agents.get(claim.agent)
        if agent is None:
            error = f"agent {claim.agent!r} is not defined in the App running this turn"
            await asyncio.to_thread(
                self.log.finish, claim, "failed", error=error, reason="unknown_agent"
            )
            return
        model = DurableModel(self, claim, agent, claim.data)
        turns = Turns(
            system=None,
            tools=model.tools,
            settings=agent.settings,
            max_turns=agent.max_turns,
            transform_context=None,
            convert_to_llm=None,
            run_tool=lambda call, tools: self._run_tool(claim, model, call, tools),
        )
        state = RunState(claim.turn_id, claim.history)
        index, pending = 0, ()
        try:
            async for event in turns.run(model, state, streaming=True):
                if event.type == "message":
                    if model.asked is not None and event.message.role == "user":
                        # The ask call's result is the answer, in the turn that answers:
                        # the other calls' results wait with the question.
                        pending = [
                            b for b in event.message.content if b.tool_use_id != model.ask_call
                        ]
                        continue
                    index += 1
                    await asyncio.to_thread(
                        self.log.add_message, claim.session_id, claim.turn_id, index, event.message
                    )
        except asyncio.CancelledError:
            reason = self._cancel_reasons.get(claim.turn_id)
            if reason is None:
                raise  # the process is stopping: the turn resumes at the next start
            asyncio.current_task().uncancel()  # type: ignore[union-attr]
            await self._cancelled(claim, state, index, reason)
            return
        if model.asked is not None:
            await asyncio.to_thread(
                self.log.finish_asking, claim, model.asked, model.ask_call, pending, model.data
            )
            return
        await self._finish(claim, state.result(), model.data)

    async def _cancelled(self, claim: Claim, state: RunState, stored: int, reason: str) -> None:
        settled = state.settled()
        for index, message in enumerate(settled[stored:], start=stored + 1):
            await asyncio.to_thread(
                self.log.add_message, claim.session_id, claim.turn_id, index, message
            )
        await asyncio.to_thread(self.log.finish, claim, "cancelled", reason=reason)

    async def _finish(self, claim: Claim, result: Any, data: dict) -> None:
        usage = _usage_dict(result.usage)
        if result.success:
            try:
                await asyncio.to_thread(
                    self.log.finish,
                    claim,
                    "completed",
                    output=result.output,
                    data=data,
                    usage=usage,
                )
                return
            except (TypeError, ValueError) as err:
                error = f"use_session_data(): the session data is not JSON: {err}"
                await asyncio.to_thread(
                    self.log.finish, claim, "failed", error=error, reason="invalid_session_data"
                )
                return
        reason = _reason(result)
        try:
            await asyncio.to_thread(
                self.log.finish,
                claim,
                "failed",
                error=result.error,
                reason=reason,
                data=data,
                usage=usage,
            )
        except (TypeError, ValueError):
            await asyncio.to_thread(
                self.log.finish, claim, "failed", error=result.error, reason=reason
            )

    async def _run_tool(
        self, claim: Claim, model: DurableModel, call: ToolUseBlock, tools: Any
    ) -> ToolResultBlock:
        if call.name == ASK and tools.get(ASK) is ask_tool():
            try:
                arguments = ask_tool().check_input(thaw(call.input))
            except ToolInputError as err:
                return ToolResultBlock(
                    call.id, f"Invalid input for tool 'ask': {err}", is_error=True
                )
            model.asked, model.ask_call = question_for(claim.turn_id, call, arguments), call.id
            return ToolResultBlock(call.id, "(waiting for the answer)")
        log, key = self.log, f"tool:{call.id}"
        step = await asyncio.to_thread(log.step, claim.turn_id, key)
        if step is not None and step.status == "done":
            return validate_blocks([step.result])[0]  # type: ignore[return-value]
        if step is not None:  # started before a crash, never finished
            tool = tools.get(call.name)
            if tool is None or not tool.idempotent:
                block = ToolResultBlock(call.id, _interrupted(call.name), is_error=True)
                await asyncio.to_thread(
                    log.finish_tool, claim.session_id, claim.turn_id, call, block
                )
                return block
        else:
            await asyncio.to_thread(log.start_tool, claim.session_id, claim.turn_id, call)
        block = await execute_tool_call(call, tools)
        await asyncio.to_thread(log.finish_tool, claim.session_id, claim.turn_id, call, block)
        return block


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


def _usage_dict(usage: Usage) -> dict[str, int]:
    return dataclasses.asdict(usage)


def _response_dict(response: ModelResponse) -> dict[str, Any]:
    return {
        "message": response.message.to_dict(),
        "usage": _usage_dict(response.usage),
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
