"""Team runs: the coordinator's plan, the task graph, and the synthesis.

One :class:`TeamRunner` per ``run_team``/``run_tasks`` call; its ledger is
the budget shared by every model call of that run. A budget refusal while
planning raises (nothing has run yet); after that, it fails the task that
hit it, skips every task not yet started, and the synthesis does not run,
so the outputs of finished tasks are still returned.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from turnkit.agent import AgentConfig
from turnkit.errors import BudgetExceededError, PlanError
from turnkit.messages import Message
from turnkit.orchestrator._attempts import Attempt, is_retryable
from turnkit.orchestrator._scheduler import GraphRun
from turnkit.orchestrator.budget import Ledger, unpriced_models
from turnkit.orchestrator.events import ProgressEvent
from turnkit.orchestrator.planning import (
    DEFAULT_COORDINATOR,
    correction_prompt,
    parse_plan,
    plan_prompt,
    synthesis_prompt,
    task_input,
)
from turnkit.orchestrator.tasks import (
    Task,
    TaskResult,
    Team,
    TeamResult,
    assign_tasks,
    check_task_graph,
)

if TYPE_CHECKING:
    from turnkit.orchestrator.orchestrator import Orchestrator

__all__ = ["TeamRunner"]


class TeamRunner:
    """Runs one team call of an orchestrator."""

    def __init__(self, orchestrator: Orchestrator, team: Team) -> None:
        if not isinstance(team, Team):
            raise TypeError(f"expected a Team, got {type(team).__name__}")
        self.orch = orchestrator
        self.team = team
        self.ledger = Ledger(orchestrator.budget)

    async def run_tasks(self, tasks: Sequence[Task]) -> TeamResult:
        tasks = _checked_tasks(tasks, self.team)
        self._check_prices(self.team.agents)
        attributes = {"turnkit.operation": "run_tasks", "turnkit.tasks": len(tasks)}
        async with self.orch.tracer.span("turnkit.run_tasks", attributes) as span:
            results, halted = await self._run_graph(tasks, None)
            team_result = self._result(tasks, results, halted)
            span.set({"turnkit.success": team_result.success})
        return team_result

    async def run_team(self, goal: str, *, plan_only: bool) -> TeamResult | list[Task]:
        if not isinstance(goal, str):
            raise TypeError(f"run_team() goal must be text (str), got {type(goal).__name__}")
        coordinator = self.team.coordinator or DEFAULT_COORDINATOR
        self._check_prices((*self.team.agents, coordinator))
        attributes = {"turnkit.operation": "run_team", "turnkit.plan_only": plan_only}
        async with self.orch.tracer.span("turnkit.run_team", attributes) as span:
            plan = await self._plan(coordinator, goal)
            span.set({"turnkit.tasks": len(plan)})
            if plan_only:
                return plan
            results, halted = await self._run_graph(plan, goal)
            if halted is not None:
                team_result = self._result(plan, results, halted)
            else:
                team_result = await self._synthesize(coordinator, goal, plan, results)
            span.set({"turnkit.success": team_result.success})
        return team_result

    def _check_prices(self, agents: Sequence[AgentConfig]) -> None:
        """With a cost budget, refuse models of unknown price before anything runs."""
        if self.orch.budget.max_cost_usd is None:
            return
        models = [
            agent.model if agent.model is not None else self.orch.default_model or "local"
            for agent in agents
            if agent.backend is None
        ]
        if missing := unpriced_models(models, self.orch.prices):
            listed = ", ".join(repr(model_id) for model_id in missing)
            raise ValueError(
                f"no price is known for {listed}, so a cost budget cannot be kept; pass "
                "prices={'provider:model': (usd_per_m_input, usd_per_m_output)}"
            )

    # -- the steps -------------------------------------------------------------

    async def _run_graph(
        self, tasks: Sequence[Task], goal: str | None
    ) -> tuple[tuple[TaskResult, ...], str | None]:
        team, orch = self.team, self.orch

        async def attempt(task: Task, agent: str, deps: Mapping[str, TaskResult]) -> Attempt:
            text = task_input(task, deps, goal)
            return await orch._invoke(team.agent(agent), text, self.ledger, task.title)

        assignment = assign_tasks(tasks, team.names)
        graph = GraphRun(tasks, assignment, attempt, orch._emit, orch.max_concurrency, orch.retry)
        results = await graph.run()
        return results, graph.halted

    async def _plan(self, coordinator: AgentConfig, goal: str) -> list[Task]:
        prompt = plan_prompt(self.team, goal)
        outcome = self._planned(await self._coordinate(coordinator, prompt), coordinator)
        tasks, problems = parse_plan(outcome.result.output, self.team)
        if not problems:
            return tasks
        conversation = [
            Message.user(prompt),
            *outcome.result.messages,
            Message.user(correction_prompt(problems)),
        ]
        outcome = self._planned(await self._coordinate(coordinator, conversation), coordinator)
        tasks, problems = parse_plan(outcome.result.output, self.team)
        if problems:
            raise PlanError(
                f"the coordinator {coordinator.name!r} gave no usable plan after a correction: "
                + "; ".join(problems),
                problems,
            )
        return tasks

    def _planned(self, outcome: Attempt, coordinator: AgentConfig) -> Attempt:
        """``outcome`` if the planning run succeeded; else its budget error or a PlanError."""
        if isinstance(outcome.error, BudgetExceededError):
            raise outcome.error
        if not outcome.result.success:
            raise PlanError(
                f"the coordinator {coordinator.name!r} failed to plan: {outcome.result.error}"
            ) from outcome.error
        return outcome

    async def _synthesize(
        self,
        coordinator: AgentConfig,
        goal: str,
        plan: Sequence[Task],
        results: tuple[TaskResult, ...],
    ) -> TeamResult:
        outcome = await self._coordinate(coordinator, synthesis_prompt(goal, results))
        if isinstance(outcome.error, BudgetExceededError):
            return self._result(plan, results, None, error=f"the budget ran out: {outcome.error}")
        if not outcome.result.success:
            error = f"the synthesis failed: {outcome.result.error}"
            return self._result(plan, results, None, error=error)
        return self._result(plan, results, None, output=outcome.result.output)

    async def _coordinate(self, coordinator: AgentConfig, input: str | list[Message]) -> Attempt:
        """One coordinator run, retried like a task on retryable errors."""
        retries = 0
        while True:
            outcome = await self.orch._invoke(coordinator, input, self.ledger)
            if outcome.result.success or not is_retryable(outcome.error):
                return outcome
            retries += 1
            if retries > self.orch.retry.max_retries:
                return outcome
            delay = self.orch.retry.delay(retries, outcome.error)
            data = {"attempt": retries, "error": outcome.result.error, "delay_s": delay}
            await self.orch._emit(ProgressEvent("task_retry", coordinator.name, None, data))
            await asyncio.sleep(delay)

    def _result(
        self,
        plan: Sequence[Task],
        results: tuple[TaskResult, ...],
        halted: str | None,
        *,
        output: str = "",
        error: str | None = None,
    ) -> TeamResult:
        incomplete = [result.title for result in results if result.status != "completed"]
        if error is None and halted is not None:
            error = halted
        if error is None and incomplete:
            listed = ", ".join(repr(title) for title in incomplete)
            error = f"{len(incomplete)} of {len(results)} tasks did not complete: {listed}"
        return TeamResult(
            results,
            output,
            self.ledger.usage,
            self.ledger.cost_usd,
            error is None,
            error,
            tuple(plan),
        )


def _checked_tasks(tasks: object, team: Team) -> tuple[Task, ...]:
    """``tasks`` as a tuple, refused (TypeError, TaskGraphError) before anything runs."""
    if not isinstance(tasks, (list, tuple)):
        raise TypeError(f"run_tasks() takes a list of Task, got {type(tasks).__name__}")
    for index, task in enumerate(tasks):
        if not isinstance(task, Task):
            raise TypeError(f"tasks[{index}] must be a Task, got {type(task).__name__}")
    check_task_graph(tasks, team.names)
    return tuple(tasks)
