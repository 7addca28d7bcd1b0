"""The model and tools an orchestrated agent really calls: wrapped, not changed.

:class:`MeteredModel` stands in front of the agent's model: before every
call it checks the budget, and around the call it opens a ``chat`` span and
counts usage and cost. :func:`traced_tools` wraps each tool's function in an
``execute_tool`` span. The agent itself is untouched: the orchestrator gives
it ``dataclasses.replace(config, model=metered, tools=traced)``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from turnkit._sync import call_sync_or_async
from turnkit.agent import resolve_agent_model
from turnkit.errors import BudgetExceededError, TokenBudgetExceededError
from turnkit.orchestrator.budget import Ledger, Price, cost_of, price_for
from turnkit.orchestrator.events import ProgressCallback, ProgressEvent, emit
from turnkit.orchestrator.tracing import (
    Tracer,
    content_attributes,
    message_stats,
    usage_attributes,
)
from turnkit.providers.base import Model, ModelRequest, ModelResponse
from turnkit.tools import Tool, is_tool_source, tool

__all__ = ["CallScope", "MeteredModel", "traced_tools"]


@dataclass(frozen=True, slots=True)
class CallScope:
    """What the model calls of one agent run share with the orchestrator."""

    ledger: Ledger
    tracer: Tracer
    on_progress: ProgressCallback | None
    prices: Mapping[str, Price] | None
    agent: str
    task: str | None = None


class MeteredModel(Model):
    """A model behind a budget check, usage and cost counting, and a span.

    The model is resolved by :meth:`resolve` (the orchestrator calls it once
    the input is known to be valid). ``refusal`` holds the budget error of a
    refused call and ``failure`` the last error the model raised: the agent
    loop turns both into a failed RunResult, and the orchestrator looks here
    to raise the first or to retry the second.
    """

    def __init__(self, source: str | Model | None, default: str | Model | None, scope: CallScope):
        self._source, self._default, self.scope = source, default, scope
        self._inner: Model | None = None
        self._price: Price | None = None
        self.refusal: BudgetExceededError | None = None
        self.failure: Exception | None = None
        self.cost_usd = 0.0

    def resolve(self) -> Model:
        """Resolve the agent's model; refuse a cost budget for an unpriced model."""
        inner = resolve_agent_model(self._source, self._default)
        self.provider, self.name = inner.provider, inner.name
        self._price = price_for(inner.id, self.scope.prices)
        if self._price is None and self.scope.ledger.budget.max_cost_usd is not None:
            raise ValueError(
                f"no price is known for model {inner.id!r}, so a cost budget cannot be "
                f"kept; pass prices={{{inner.id!r}: (usd_per_m_input, usd_per_m_output)}}"
            )
        self._inner = inner
        return inner

    def takes_output_schema(self, with_tools: bool) -> bool:
        """As the model it meters."""
        inner = self._inner if self._inner is not None else self.resolve()
        return inner.takes_output_schema(with_tools)

    async def request(self, request: ModelRequest) -> ModelResponse:
        inner = self._inner if self._inner is not None else self.resolve()
        await self.check_budget(inner.id)
        scope = self.scope
        async with scope.tracer.span(
            f"chat {inner.name}", self._request_attributes(inner, request), kind="client"
        ) as span:
            try:
                response = await inner.request(request)
            except Exception as err:
                self.failure = err
                raise
            cost = cost_of(response.usage, self._price)
            scope.ledger.add(response.usage, cost)
            self.cost_usd += cost
            span.set(self._response_attributes(response, cost))
        return response

    async def check_budget(self, model_id: str) -> None:
        """Refuse the next call if the budget is spent: ``budget_exceeded``, then raise."""
        scope = self.scope
        try:
            scope.ledger.check()
        except BudgetExceededError as err:
            self.refusal = err
            kind = "tokens" if isinstance(err, TokenBudgetExceededError) else "cost"
            data = {"kind": kind, "spent": err.spent, "limit": err.limit, "model": model_id}
            event = ProgressEvent("budget_exceeded", scope.agent, scope.task, data)
            await emit(scope.on_progress, event)
            raise

    def _request_attributes(self, inner: Model, request: ModelRequest) -> dict[str, Any]:
        settings = request.settings
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": inner.provider,
            "gen_ai.system": inner.provider,
            "gen_ai.request.model": inner.name,
            "gen_ai.agent.name": self.scope.agent,
            "gen_ai.request.max_tokens": settings.max_output_tokens,
            "gen_ai.request.temperature": settings.temperature,
            "turnkit.request.tools": len(request.tools),
            **message_stats(request.messages, "turnkit.request"),
        }
        if self.scope.tracer.capture_content:
            attributes["gen_ai.system_instructions"] = request.system
            attributes.update(content_attributes("gen_ai.input.messages", request.messages))
        return attributes

    def _response_attributes(self, response: ModelResponse, cost: float) -> dict[str, Any]:
        origin = response.message.origin
        attributes: dict[str, Any] = {
            "gen_ai.response.model": origin.model if origin is not None else None,
            "gen_ai.response.finish_reasons": [response.stop_reason],
            **usage_attributes(response.usage),
            "turnkit.cost_usd": cost,
            **message_stats((response.message,), "turnkit.response"),
        }
        if self.scope.tracer.capture_content:
            attributes.update(content_attributes("gen_ai.output.messages", (response.message,)))
        return attributes


def traced_tools(tools: Sequence[Tool | Callable[..., Any]], scope: CallScope) -> tuple[Any, ...]:
    """``tools`` with each function run inside an ``execute_tool`` span (tool
    sources, such as MCP servers, give traced tools too)."""
    traced: list[Any] = []
    for item in tools:
        if is_tool_source(item):
            traced.append(_TracedSource(item, scope))
            continue
        found = item if isinstance(item, Tool) else tool(item)
        traced.append(replace(found, fn=_traced(found, scope)))
    return tuple(traced)


class _TracedSource:
    """A tool source whose tools run inside ``execute_tool`` spans."""

    def __init__(self, source: Any, scope: CallScope) -> None:
        self.source, self.scope = source, scope

    async def list_tools(self) -> tuple[Tool, ...]:
        listed = await self.source.list_tools()
        return tuple(replace(t, fn=_traced(t, self.scope)) for t in listed)


def _traced(found: Tool, scope: CallScope) -> Callable[..., Any]:
    fn, tracer = found.fn, scope.tracer

    async def run(**arguments: Any) -> Any:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": found.name,
            "gen_ai.agent.name": scope.agent,
            "turnkit.tool.input_bytes": len(_json(arguments).encode()),
        }
        if tracer.capture_content:
            attributes["gen_ai.tool.call.arguments"] = _json(arguments)
        async with tracer.span(f"execute_tool {found.name}", attributes) as span:
            # Run as the agent would have: sync functions in a worker thread.
            value = await call_sync_or_async(fn, **arguments)
            span.set({"turnkit.tool.result_bytes": len(_json(value).encode())})
            if tracer.capture_content:
                span.set({"gen_ai.tool.call.result": _json(value)})
            return value

    return run


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=_describe)
    except (TypeError, ValueError):
        return json.dumps(repr(value))


def _describe(value: Any) -> Any:
    to_dict = getattr(value, "to_dict", None)
    return to_dict() if callable(to_dict) else repr(value)
