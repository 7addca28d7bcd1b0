"""Orchestrator: one-off agents and teams, with progress, tracing, budgets and evaluation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, overload

from turnkit._sync import run_sync
from turnkit.agent import Agent, AgentConfig, RunResult
from turnkit.errors import BudgetExceededError
from turnkit.messages import Message
from turnkit.orchestrator._attempts import Attempt, RetryPolicy, usage_data
from turnkit.orchestrator._metered import CallScope, MeteredModel, traced_tools
from turnkit.orchestrator.budget import Budget, Ledger, Price
from turnkit.orchestrator.evaluation import EvaluationStats, OnlineEvaluation
from turnkit.orchestrator.events import (
    ProgressCallback,
    ProgressEvent,
    TraceCallback,
    emit,
)
from turnkit.orchestrator.tasks import Task, Team, TeamResult
from turnkit.orchestrator.tracing import (
    Span,
    Tracer,
    content_attributes,
    message_stats,
    usage_attributes,
)
from turnkit.providers.base import Model

if TYPE_CHECKING:
    from turnkit.orchestrator._evaluator import Evaluator

__all__ = ["Orchestrator"]

RunInput = str | Sequence[Message | Mapping[str, Any]]


class Orchestrator:
    """Runs agents and teams of agents, watching what they do and spend.

    >>> from turnkit.testing import ScriptedModel
    >>> orch = Orchestrator(ScriptedModel(["Paris."]))
    >>> orch.run_agent_sync(AgentConfig("geo"), "Capital of France?").output
    'Paris.'

    - ``default_model``: the model of agents whose ``AgentConfig.model`` is
      None (else ``"local"``).
    - ``on_progress(event)`` / ``on_trace(event)``: sync or async callbacks
      for :class:`ProgressEvent` s and finished spans (:class:`TraceEvent`);
      each gets its own copy, and one that raises is logged, never raised.
    - ``max_concurrency``: tasks of a task graph running at once.
    - ``budget``: limits for each top-level call (``run_agent``,
      ``run_tasks``, ``run_team``: one budget is shared by all its model
      calls), checked before every model call.
    - ``evaluation``: :class:`OnlineEvaluation` of sampled runs.
    - ``prices``: ``{"provider:model": (usd_per_m_input, usd_per_m_output)}``
      over the built-in table (:data:`~turnkit.orchestrator.DEFAULT_PRICES`).
    - ``capture_content``: put message content in spans (off: only sizes
      and counts).
    - ``max_retries``, ``retry_base_delay``, ``retry_max_delay``: retries of
      retryable provider errors in team runs (exponential backoff, jitter).
    """

    def __init__(
        self,
        default_model: str | Model | None = None,
        *,
        on_progress: ProgressCallback | None = None,
        on_trace: TraceCallback | None = None,
        max_concurrency: int = 5,
        budget: Budget | None = None,
        evaluation: OnlineEvaluation | None = None,
        prices: Mapping[str, Price] | None = None,
        capture_content: bool = False,
        max_retries: int = 2,
        retry_base_delay: float = 1.0,
        retry_max_delay: float = 30.0,
    ) -> None:
        _check_settings(on_progress, on_trace, max_concurrency, budget, evaluation, max_retries)
        if retry_base_delay < 0 or retry_max_delay < 0:
            raise ValueError("retry delays must be >= 0")
        self.default_model = default_model
        self.on_progress = on_progress
        self.max_concurrency = max_concurrency
        self.budget = budget if budget is not None else Budget()
        self.evaluation = evaluation
        self.prices = dict(prices) if prices is not None else None
        self.retry = RetryPolicy(max_retries, retry_base_delay, retry_max_delay)
        self.tracer = Tracer(on_trace, capture_content)
        self._evaluator: Evaluator | None = None
        if evaluation is not None:
            # here, not at the top: the evaluator needs asyncio and threads
            from turnkit.orchestrator._evaluator import Evaluator

            self._evaluator = Evaluator(evaluation)

    # -- one agent -----------------------------------------------------------

    async def run_agent(self, config: AgentConfig, input: RunInput) -> RunResult:
        """Run a one-off :class:`~turnkit.Agent` built from ``config`` on ``input``.

        The input is validated first: an invalid one raises
        :class:`~turnkit.InvalidMessageError` before any event, evaluation
        or model call. A model call refused by the budget raises
        :class:`~turnkit.errors.TokenBudgetExceededError` or
        :class:`~turnkit.errors.CostBudgetExceededError` (after a
        ``budget_exceeded`` event); other failures give a failed RunResult,
        as with ``Agent.run``.
        """
        attempt = await self._invoke(config, input, Ledger(self.budget))
        if isinstance(attempt.error, BudgetExceededError):
            raise attempt.error
        return attempt.result

    def run_agent_sync(self, config: AgentConfig, input: RunInput) -> RunResult:
        """:meth:`run_agent`, for code without an event loop (or inside one)."""
        return run_sync(self.run_agent(config, input))

    async def _invoke(
        self, config: AgentConfig, input: RunInput, ledger: Ledger, task: str | None = None
    ) -> Attempt:
        """One agent run against ``ledger``; a budget refusal is returned, not raised."""
        if not isinstance(config, AgentConfig):
            raise TypeError(f"expected an AgentConfig, got {type(config).__name__}")
        scope = CallScope(ledger, self.tracer, self.on_progress, self.prices, config.name, task)
        metered = MeteredModel(config.model, self.default_model, scope)
        backend = config.backend is not None
        if not backend:
            config = replace(config, model=metered, tools=traced_tools(config.tools, scope))
        agent = Agent(config)
        messages = agent.validate_run_input(input)
        if not backend:
            metered.resolve()
        await self._progress("agent_start", config.name, task, lambda: _start(input, messages))
        async with self.tracer.span(
            f"invoke_agent {config.name}", self._agent_attributes(config, metered, messages, task)
        ) as span:
            result = await self._run(agent, input, messages, metered, backend, task)
            refusal = metered.refusal
            self._end_agent_span(span, result, metered, refusal)
        if refusal is not None:
            if task is None:  # a task's failure is reported once, by the scheduler
                await self._error(config.name, task, refusal)
            return Attempt(result, refusal, metered.cost_usd)
        await self._progress(
            "agent_complete", config.name, task, lambda: _complete(result, metered)
        )
        if self._evaluator is not None:
            from turnkit.orchestrator._evaluator import RunSample

            sampled = input if isinstance(input, str) else messages
            self._evaluator.offer(RunSample(config.name, task, sampled, result))
        return Attempt(result, None if result.success else metered.failure, metered.cost_usd)

    async def _run(
        self,
        agent: Agent,
        input: RunInput,
        messages: tuple[Message, ...],
        metered: MeteredModel,
        backend: bool,
        task: str | None,
    ) -> RunResult:
        """``agent.run``; for a backend, the budget is checked before and counted after."""
        try:
            if backend:
                await metered.check_budget("backend")
                try:
                    result = await agent.run(input)
                finally:
                    aclose = getattr(agent, "aclose", None)  # what the one-off agent holds
                    if aclose is not None:
                        await aclose()
                metered.scope.ledger.add(result.usage, 0.0)
                return result
            return await agent.run(input if isinstance(input, str) else messages)
        except BudgetExceededError as err:
            return RunResult(False, stop_reason="error", error=f"{type(err).__name__}: {err}")
        except Exception as err:
            if task is None:  # a task's failure is reported once, by the scheduler
                await self._error(agent.name, task, err)
            raise

    def _agent_attributes(
        self,
        config: AgentConfig,
        metered: MeteredModel,
        messages: tuple[Message, ...],
        task: str | None,
    ) -> dict[str, Any]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": config.name,
            "turnkit.task": task,
            **message_stats(messages, "turnkit.input"),
        }
        if config.backend is None:
            attributes["gen_ai.request.model"] = metered.name
            attributes["gen_ai.provider.name"] = metered.provider
            attributes["gen_ai.system"] = metered.provider
        if self.tracer.capture_content:
            attributes["gen_ai.system_instructions"] = config.system
            attributes.update(content_attributes("gen_ai.input.messages", messages))
        return attributes

    def _end_agent_span(
        self,
        span: Span,
        result: RunResult,
        metered: MeteredModel,
        refusal: BaseException | None,
    ) -> None:
        span.set(
            {
                **usage_attributes(result.usage),
                "gen_ai.response.finish_reasons": [result.stop_reason],
                "turnkit.cost_usd": metered.cost_usd,
                "turnkit.success": result.success,
                **message_stats(result.messages, "turnkit.output"),
            }
        )
        if self.tracer.capture_content:
            span.set(content_attributes("gen_ai.output.messages", result.messages))
        if refusal is not None:
            span.fail(refusal)
        elif not result.success:
            span.fail(result.error or "the run failed")

    # -- teams ---------------------------------------------------------------

    async def run_tasks(self, team: Team, tasks: Sequence[Task]) -> TeamResult:
        """Run ``tasks`` with ``team``'s agents as a dependency graph.

        The task list is checked first (:class:`~turnkit.errors.TaskGraphError`
        for duplicate titles, unknown assignees or dependencies, cycles).
        Each task starts as soon as its dependencies have completed, at most
        ``max_concurrency`` at once; unassigned tasks go to the team's agents
        in turn (round robin, in list order). See :class:`TeamResult`.
        """
        from turnkit.orchestrator._teams import TeamRunner  # loads asyncio

        return await TeamRunner(self, team).run_tasks(tasks)

    def run_tasks_sync(self, team: Team, tasks: Sequence[Task]) -> TeamResult:
        """:meth:`run_tasks`, for code without an event loop (or inside one)."""
        return run_sync(self.run_tasks(team, tasks))

    @overload
    async def run_team(
        self, team: Team, goal: str, *, plan_only: Literal[False] = False
    ) -> TeamResult: ...

    @overload
    async def run_team(self, team: Team, goal: str, *, plan_only: Literal[True]) -> list[Task]: ...

    async def run_team(
        self, team: Team, goal: str, *, plan_only: bool = False
    ) -> TeamResult | list[Task]:
        """Plan ``goal`` with the coordinator, run the plan, and synthesise the answer.

        The coordinator (``team.coordinator``, else a default one on the
        default model) writes the tasks as JSON; an unusable plan gets one
        corrective retry, then :class:`~turnkit.errors.PlanError`. With
        ``plan_only=True`` the plan (a list of :class:`Task`) is returned
        without running it. ``goal`` must be a str (TypeError otherwise).
        """
        from turnkit.orchestrator._teams import TeamRunner  # loads asyncio

        return await TeamRunner(self, team).run_team(goal, plan_only=plan_only)

    def run_team_sync(self, team: Team, goal: str, *, plan_only: bool = False) -> Any:
        """:meth:`run_team`, for code without an event loop (or inside one)."""
        return run_sync(self.run_team(team, goal, plan_only=plan_only))  # type: ignore[call-overload]

    # -- evaluation ----------------------------------------------------------

    @property
    def evaluation_stats(self) -> EvaluationStats:
        """Counts of sampled, dropped and scored runs (all zero without evaluation)."""
        return self._evaluator.stats if self._evaluator is not None else EvaluationStats()

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until every pending evaluation is scored and written."""
        if self._evaluator is not None:
            await self._evaluator.drain(timeout)

    async def aclose(self, timeout: float | None = None) -> None:
        """Drain pending evaluations and stop the evaluation thread."""
        if self._evaluator is not None:
            await self._evaluator.aclose(timeout)

    async def __aenter__(self) -> Orchestrator:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- events --------------------------------------------------------------

    async def _emit(self, event: ProgressEvent) -> None:
        """Tell ``on_progress`` about ``event`` (a copy of it)."""
        await emit(self.on_progress, event)

    async def _progress(self, kind: Any, agent: str, task: str | None, data: Any) -> None:
        if self.on_progress is not None:  # data is built only when someone listens
            await self._emit(ProgressEvent(kind, agent, task, data()))

    async def _error(self, agent: str | None, task: str | None, error: BaseException) -> None:
        data = {"error": f"{type(error).__name__}: {error}", "type": type(error).__name__}
        await self._emit(ProgressEvent("error", agent, task, data))


def _start(input: RunInput, messages: tuple[Message, ...]) -> dict[str, Any]:
    if isinstance(input, str):
        return {"prompt": input}
    return {"messages": [message.to_dict() for message in messages]}


def _complete(result: RunResult, metered: MeteredModel) -> dict[str, Any]:
    return {
        "success": result.success,
        "output": result.output,
        "usage": usage_data(result.usage),
        "stop_reason": result.stop_reason,
        "error": result.error,
        "cost_usd": metered.cost_usd,
    }


def _check_settings(
    on_progress: object,
    on_trace: object,
    max_concurrency: object,
    budget: object,
    evaluation: object,
    max_retries: object,
) -> None:
    for name, callback in (("on_progress", on_progress), ("on_trace", on_trace)):
        if callback is not None and not callable(callback):
            raise TypeError(f"{name} must be callable, got {callback!r}")
    if type(max_concurrency) is not int or max_concurrency < 1:
        raise ValueError(f"max_concurrency must be an int >= 1, got {max_concurrency!r}")
    if type(max_retries) is not int or max_retries < 0:
        raise ValueError(f"max_retries must be an int >= 0, got {max_retries!r}")
    if budget is not None and not isinstance(budget, Budget):
        raise TypeError(f"budget must be a Budget, got {budget!r}")
    if evaluation is not None and not isinstance(evaluation, OnlineEvaluation):
        raise TypeError(f"evaluation must be an OnlineEvaluation, got {evaluation!r}")
