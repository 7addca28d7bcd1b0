"""The durable model: the agent's model as one turn sees it (rendered, recorded, replayed).

A :class:`Model` around the agent's model, as the orchestrator's metered
model is, so the one agent loop needs no hook for durability. Before every
model call it runs the agent's render (its return value is that call's
system text; ``use_tool`` adds tools; a sync render runs in a worker
thread), then answers from the turn's recorded step if there is one (a
replay after a crash), else calls the real model and buffers the reply as
a step, written with the turn's next write.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from turnkit._sync import call_sync_or_async
from turnkit._values import describe_error
from turnkit.errors import TurnkitError
from turnkit.messages import Message
from turnkit.providers.base import (
    Model,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    Usage,
    events_of,
)
from turnkit.sessions.db.steps import Claim, Journal, PendingWrites
from turnkit.sessions.model.records import Question
from turnkit.sessions.render.hooks import RenderScope, current_scope
from turnkit.tools import Tool, gather_tools

if TYPE_CHECKING:
    from turnkit.sessions.definitions import AgentDef
    from turnkit.sessions.runtime.live_publish import TurnLive

__all__ = ["Asked", "DurableModel", "RenderError", "describe_error"]


class RenderError(TurnkitError):
    """An agent's render function raised, or returned something other than text."""


class Asked(Exception):
    """The model called ``ask``: the loop stops before its next model call."""


class DurableModel(Model):
    """The agent's model as seen by one turn: rendered, recorded, replayed."""

    def __init__(
        self,
        agent: AgentDef,
        claim: Claim,
        data: dict[str, Any],
        resolve_tool: Callable[[Any], list[Any]],
        journal: Journal,
        pending: PendingWrites,
    ) -> None:
        self.provider, self.name = agent.model.provider, agent.model.name
        self.context_window = agent.model.context_window  # what compaction must fit in
        self._agent, self._claim, self._data = agent, claim, data
        self._resolve_tool, self._journal, self._pending = resolve_tool, journal, pending
        self.tools: dict[str, Tool] = dict(agent.tools)
        self._calls = 0
        self.asked: Question | None = None  # set when the model calls ask
        self.ask_call: str | None = None
        # Awaited first in each call (the turn's compaction stores what the loop made).
        self.before_call: Callable[[], Awaitable[None]] | None = None
        # What joins the turn before model call n (replayed or not): runtime/steering.py.
        self.steer: Callable[[int, bool], Awaitable[Message | None]] | None = None
        self.live: TurnLive | None = None  # set when followers may watch the calls stream

    async def _render(self) -> tuple[str | None, tuple[Any, ...]]:
        agent = self._agent
        scope = RenderScope(self._claim.input, self._data, self._resolve_tool)
        token = current_scope.set(scope)
        try:
            # A sync render runs off the loop: a slow one stalls no other session.
            system = await call_sync_or_async(agent.render)
        except Exception as err:
            raise RenderError(
                f"render of agent {agent.name!r} raised {describe_error(err)}"
            ) from err
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

    async def offer_tools(self) -> None:
        """Run the render once for the tools it offers (``self.tools``), before any
        model call: a turn that decides held tool calls runs them first."""
        await self._render()

    def takes_output_schema(self, with_tools: bool) -> bool:
        return self._agent.model.takes_output_schema(with_tools)

    async def _prepare(self, request: ModelRequest) -> tuple[ModelRequest, str, Any]:
        """Render this call; the request, its step key, and its recorded step if any."""
        if self.asked is not None:
            raise Asked(self.asked.id)
        if self.before_call is not None:
            await self.before_call()
        system, specs = await self._render()
        # Tools the loop itself added (structured output's) stay; the rest come from the render.
        added = tuple(spec for spec in request.tools if spec.name not in self._agent.tools)
        request = dataclasses.replace(request, system=system, tools=(*specs, *added))
        number = self._calls
        key = f"model:{number}"
        self._calls += 1
        recorded = None
        if self._claim.resumed:  # a replay: answer from the record while there is one
            recorded = await asyncio.to_thread(self._journal.step, self._claim.turn_id, key)
        if self.steer is not None:  # inputs steered into the turn, after the latest results
            joined = await self.steer(number, recorded is not None)
            if joined is not None:
                request = dataclasses.replace(request, messages=(*request.messages, joined))
        return request, key, recorded

    async def request(self, request: ModelRequest) -> ModelResponse:
        request, key, recorded = await self._prepare(request)
        if recorded is not None:
            return _response_from(recorded.result)
        response = await self._agent.model.request(request)
        self._pending.steps.append((key, _response_dict(response)))
        return response

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """The call streamed: live deltas for followers while it runs, the reply
        recorded as one step. A recorded reply is replayed whole, streaming nothing."""
        request, key, recorded = await self._prepare(request)
        if recorded is not None:
            for event in events_of(_response_from(recorded.result)):
                yield event
            return
        publisher = None if self.live is None else self.live.publisher(key)
        try:
            async for event in self._agent.model.stream(request):
                if event.type != "done":
                    if publisher is not None:
                        publisher.add(event)
                    if event.type != "tool_input_delta":  # the loop knows whole calls only
                        yield event
                    continue
                if publisher is not None:  # every delta stored before the reply is
                    await publisher.finish()
                    publisher = None
                assert event.response is not None
                self._pending.steps.append((key, _response_dict(event.response)))
                yield event
        finally:
            if publisher is not None:
                publisher.abort()


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
