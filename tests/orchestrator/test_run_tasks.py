"""run_tasks: a DAG of tasks, concurrency, dependency outputs, retries, skips, refusals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from turnkit import AgentConfig, Orchestrator, Task, Team
from turnkit.errors import ProviderError, TaskGraphError
from turnkit.testing import ScriptedModel, ScriptedRequest

from ._support import Progress, echo_task, every, task_title


def team_of(model: ScriptedModel, *names: str) -> Team:
    return Team([AgentConfig(name, model=model) for name in names or ("worker",)])


def orchestrator(**options: Any) -> Orchestrator:
    options.setdefault("retry_base_delay", 0.0)
    return Orchestrator(**options)


DIAMOND = [
    Task("A", "first"),
    Task("B", "second", depends_on=["A"]),
    Task("C", "third", depends_on=["A"]),
    Task("D", "last", depends_on=["B", "C"]),
]


async def test_tasks_run_after_their_dependencies() -> None:
    progress, model = Progress(), ScriptedModel(every(echo_task))
    result = await orchestrator(on_progress=progress).run_tasks(team_of(model), DIAMOND)
    assert result.success
    order = progress.order()
    assert order.index(("task_complete", "A")) < order.index(("task_start", "B"))
    assert order.index(("task_complete", "A")) < order.index(("task_start", "C"))
    assert order.index(("task_complete", "B")) < order.index(("task_start", "D"))
    assert order.index(("task_complete", "C")) < order.index(("task_start", "D"))
    assert [t.title for t in result.tasks] == ["A", "B", "C", "D"]  # list order
    assert [t.output for t in result.tasks] == ["out-A", "out-B", "out-C", "out-D"]


async def test_dependants_see_their_dependencies_outputs_only() -> None:
    model = ScriptedModel(every(echo_task))
    await orchestrator().run_tasks(team_of(model), DIAMOND)
    inputs = {task_title(request): request.last_text for request in model.requests}
    assert "out-B" in inputs["D"] and "out-C" in inputs["D"]
    assert "out-A" not in inputs["D"]  # not a direct dependency
    assert "out-A" in inputs["B"]
    assert "last" in inputs["D"]  # the task's description


async def test_no_more_than_max_concurrency_tasks_run_at_once() -> None:
    running, peak = 0, 0
    two_running, release = asyncio.Event(), asyncio.Event()

    async def slow(request: ScriptedRequest) -> str:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        if running == 2:
            two_running.set()
        await asyncio.wait_for(release.wait(), 5)
        running -= 1
        return "done"

    progress, model = Progress(), ScriptedModel(every(slow))
    tasks = [Task(f"T{i}", "independent") for i in range(6)]
    run = asyncio.create_task(
        orchestrator(max_concurrency=2, on_progress=progress).run_tasks(team_of(model), tasks)
    )
    await asyncio.wait_for(two_running.wait(), 5)
    assert len(progress.of("task_start")) == 2  # the others wait for a slot
    release.set()
    result = await asyncio.wait_for(run, 5)
    assert result.success
    assert peak == 2


async def test_unassigned_tasks_go_round_robin_and_assignees_are_kept() -> None:
    model = ScriptedModel(every("ok"))
    tasks = [Task("1", "x"), Task("2", "x", assignee="a"), Task("3", "x"), Task("4", "x")]
    result = await orchestrator().run_tasks(team_of(model, "a", "b"), tasks)
    assert [t.agent for t in result.tasks] == ["a", "a", "b", "a"]


async def test_a_retryable_error_is_retried_then_succeeds() -> None:
    def overloaded(request: ScriptedRequest) -> str:
        raise ProviderError("overloaded", provider="scripted", status=529, retryable=True)

    progress, model = Progress(), ScriptedModel([overloaded, "recovered"])
    result = await orchestrator(on_progress=progress).run_tasks(
        team_of(model), [Task("T", "do it")]
    )
    (task,) = result.tasks
    assert (task.status, task.output, task.attempts) == ("completed", "recovered", 2)
    (retry,) = progress.of("task_retry")
    assert retry.task == "T"
    assert retry.data["attempt"] == 1
    assert "overloaded" in retry.data["error"]
    assert retry.data["delay_s"] == 0.0


async def test_retries_stop_after_max_retries() -> None:
    def overloaded(request: ScriptedRequest) -> str:
        raise ProviderError("rate limited", provider="scripted", status=429, retryable=True)

    progress, model = Progress(), ScriptedModel(every(overloaded))
    result = await orchestrator(max_retries=2, on_progress=progress).run_tasks(
        team_of(model), [Task("T", "do it")]
    )
    (task,) = result.tasks
    assert (task.status, task.attempts) == ("failed", 3)
    assert len(model.requests) == 3
    assert len(progress.of("task_retry")) == 2
    assert "rate limited" in (task.error or "")


async def test_a_non_retryable_error_is_not_retried() -> None:
    def refused(request: ScriptedRequest) -> str:
        raise ProviderError("bad request", provider="scripted", status=400)

    model = ScriptedModel(every(refused))
    result = await orchestrator().run_tasks(team_of(model), [Task("T", "do it")])
    assert result.tasks[0].status == "failed"
    assert len(model.requests) == 1


async def test_a_failed_task_skips_its_dependants_transitively_and_only_them() -> None:
    def reply(request: ScriptedRequest) -> str:
        if task_title(request) == "A":
            raise ProviderError("broken", provider="scripted", status=400)
        return echo_task(request)

    progress, model = Progress(), ScriptedModel(every(reply))
    tasks = [*DIAMOND, Task("E", "unrelated")]
    result = await orchestrator(on_progress=progress).run_tasks(team_of(model), tasks)
    status = {t.title: t.status for t in result.tasks}
    assert status == {
        "A": "failed",
        "B": "skipped",
        "C": "skipped",
        "D": "skipped",
        "E": "completed",
    }
    assert not result.success
    assert "did not complete" in (result.error or "")
    skipped = {event.task: event.data for event in progress.of("task_skipped")}
    assert skipped["B"] == {"reason": "depends on 'A', which failed", "cause": "A"}
    assert skipped["D"]["cause"] == "A"
    assert "skipped" in skipped["D"]["reason"]
    assert {task_title(r) for r in model.requests} == {"A", "E"}
    error_events = progress.of("error")
    assert [e.task for e in error_events] == ["A"]


@pytest.mark.parametrize(
    ("tasks", "names"),
    [
        ([Task("A", "x", depends_on=["B"]), Task("B", "x", depends_on=["A"])], ["'A' -> 'B'"]),
        ([Task("A", "x", depends_on=["A"])], ["cycle", "'A' -> 'A'"]),
        ([Task("A", "x", assignee="nobody")], ["unknown agent 'nobody'"]),
        ([Task("A", "x", depends_on=["Z"])], ["unknown task 'Z'"]),
        ([Task("A", "x"), Task("A", "y")], ["duplicate task title 'A'"]),
    ],
)
async def test_invalid_graphs_are_refused_before_anything_runs(
    tasks: list[Task], names: list[str]
) -> None:
    progress, model = Progress(), ScriptedModel(every("ok"))
    with pytest.raises(TaskGraphError) as caught:
        await orchestrator(on_progress=progress).run_tasks(team_of(model), tasks)
    for name in names:
        assert name in str(caught.value)
    assert model.requests == []
    assert progress.events == []


async def test_all_graph_problems_are_named_at_once() -> None:
    tasks = [Task("A", "x", assignee="ghost", depends_on=["Z"]), Task("A", "y")]
    with pytest.raises(TaskGraphError) as caught:
        await orchestrator().run_tasks(team_of(ScriptedModel()), tasks)
    assert len(caught.value.problems) == 3


def test_task_fields_are_checked_when_built() -> None:
    with pytest.raises(TypeError, match="description must be text"):
        Task("A", ["not", "text"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="depends_on must be a list"):
        Task("B", "x", depends_on="A")
    with pytest.raises(ValueError, match="empty"):
        Task(" ", "x")
    assert Task("C", "x", depends_on=["A"]).depends_on == ("A",)


def test_team_needs_distinct_agent_configs() -> None:
    with pytest.raises(ValueError, match="two agents are named 'a'"):
        Team([AgentConfig("a"), AgentConfig("a")])
    with pytest.raises(ValueError, match="at least one agent"):
        Team([])
    with pytest.raises(TypeError):
        Team(["a"])  # type: ignore[list-item]


async def test_run_tasks_refuses_other_things_than_tasks() -> None:
    with pytest.raises(TypeError, match=r"tasks\[0\] must be a Task"):
        await orchestrator().run_tasks(team_of(ScriptedModel()), [{"title": "A"}])  # type: ignore[list-item]


async def test_task_events_carry_agent_task_and_totals() -> None:
    progress, model = Progress(), ScriptedModel(every(echo_task))
    result = await orchestrator(on_progress=progress).run_tasks(
        team_of(model, "w"), [Task("A", "x")]
    )
    assert progress.types() == ["task_start", "agent_start", "agent_complete", "task_complete"]
    assert all((e.agent, e.task) == ("w", "A") for e in progress.events)
    complete = progress.of("task_complete")[0].data
    assert complete["status"] == "completed"
    assert complete["output"] == "out-A"
    assert complete["attempts"] == 1
    assert result.usage.input_tokens == complete["usage"]["input_tokens"] > 0
    assert result.task("A").usage == result.usage


def test_run_tasks_sync() -> None:
    model = ScriptedModel(every(echo_task))
    result = orchestrator().run_tasks_sync(team_of(model), [Task("A", "x")])
    assert result.task("A").output == "out-A"
