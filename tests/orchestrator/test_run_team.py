"""run_team: the coordinator plans (with one corrective retry), the team works, it synthesises."""

from __future__ import annotations

import json
from typing import Any

import pytest

from turnkit import AgentConfig, Orchestrator, Task, Team
from turnkit.errors import PlanError, ProviderError
from turnkit.testing import ScriptedModel, ScriptedRequest

from ._support import Progress, echo_task, every

PLAN = [
    {"title": "Research", "description": "Find facts.", "assignee": "researcher"},
    {
        "title": "Write",
        "description": "Write it up.",
        "assignee": "writer",
        "depends_on": ["Research"],
    },
]


def team(coordinator: ScriptedModel | None, workers: ScriptedModel) -> Team:
    agents = [AgentConfig("researcher", model=workers), AgentConfig("writer", model=workers)]
    boss = AgentConfig("boss", model=coordinator) if coordinator is not None else None
    return Team(agents, coordinator=boss)


def orchestrator(**options: Any) -> Orchestrator:
    return Orchestrator(retry_base_delay=0.0, **options)


async def test_plan_run_and_synthesis() -> None:
    boss = ScriptedModel([json.dumps(PLAN), lambda request: "FINAL: " + request.last_text])
    workers = ScriptedModel(every(echo_task))
    result = await orchestrator().run_team(team(boss, workers), "Write about tide pools")
    assert result.success
    assert [t.title for t in result.plan] == ["Research", "Write"]
    assert [(t.title, t.agent, t.output) for t in result.tasks] == [
        ("Research", "researcher", "out-Research"),
        ("Write", "writer", "out-Write"),
    ]
    assert result.output.startswith("FINAL: ")
    assert "out-Research" in result.output and "out-Write" in result.output
    planning = boss.requests[0].last_text
    assert "Write about tide pools" in planning
    assert '"researcher", "writer"' in planning  # the allowed assignees
    assert "Write about tide pools" in workers.requests[0].last_text  # the goal, for context


async def test_usage_totals_include_the_coordinator() -> None:
    boss = ScriptedModel([json.dumps(PLAN), "final"])
    workers = ScriptedModel(every(echo_task))
    result = await orchestrator().run_team(team(boss, workers), "goal")
    task_tokens = sum(t.usage.input_tokens for t in result.tasks)
    assert result.usage.input_tokens > task_tokens


async def test_invalid_json_gets_one_corrective_retry_saying_what_was_wrong() -> None:
    boss = ScriptedModel(["Sure! Here is my plan: research, then write.", json.dumps(PLAN), "ok"])
    workers = ScriptedModel(every(echo_task))
    result = await orchestrator().run_team(team(boss, workers), "goal")
    assert result.success
    retry = boss.requests[1]
    assert "not valid JSON" in retry.last_text
    assert [m.role for m in retry.messages] == ["user", "assistant", "user"]
    assert retry.messages[1].text.startswith("Sure! Here is my plan")


async def test_schema_problems_are_named_in_the_correction() -> None:
    bad = [
        {"title": "Research", "description": "Find facts.", "assignee": "intern"},
        {"title": "Write", "depends_on": ["Nothing"]},
    ]
    boss = ScriptedModel([json.dumps({"tasks": bad}), f"```json\n{json.dumps(PLAN)}\n```", "ok"])
    result = await orchestrator().run_team(team(boss, ScriptedModel(every("x"))), "goal")
    assert result.success
    correction = boss.requests[1].last_text
    assert "tasks[0].assignee: 'intern' is not one of" in correction
    assert "tasks[1]: 'description' is a required property" in correction


async def test_graph_problems_in_a_plan_are_corrected_too() -> None:
    cyclic = [
        {"title": "A", "description": "x", "depends_on": ["B"]},
        {"title": "B", "description": "y", "depends_on": ["A"]},
    ]
    boss = ScriptedModel([json.dumps(cyclic), json.dumps(PLAN), "ok"])
    await orchestrator().run_team(team(boss, ScriptedModel(every("x"))), "goal")
    assert "dependency cycle" in boss.requests[1].last_text


async def test_a_plan_still_invalid_after_the_correction_raises_and_runs_nothing() -> None:
    boss = ScriptedModel(["no json", "still no json"])
    workers = ScriptedModel(every("x"))
    with pytest.raises(PlanError, match="no usable plan") as caught:
        await orchestrator().run_team(team(boss, workers), "goal")
    assert caught.value.problems
    assert len(boss.requests) == 2
    assert workers.requests == []


async def test_plan_only_returns_the_tasks_without_running_them() -> None:
    boss = ScriptedModel([json.dumps(PLAN)])
    workers = ScriptedModel(every("x"))
    plan = await orchestrator().run_team(team(boss, workers), "goal", plan_only=True)
    assert plan == [
        Task("Research", "Find facts.", "researcher"),
        Task("Write", "Write it up.", "writer", ("Research",)),
    ]
    assert workers.requests == []
    assert len(boss.requests) == 1


async def test_without_a_coordinator_the_default_one_runs_on_the_default_model() -> None:
    default = ScriptedModel([json.dumps(PLAN), "synthesis"])
    workers = ScriptedModel(every(echo_task))
    progress = Progress()
    result = await orchestrator(default_model=default, on_progress=progress).run_team(
        team(None, workers), "goal"
    )
    assert result.output == "synthesis"
    assert progress.events[0].agent == "coordinator"


@pytest.mark.parametrize("goal", [None, 42, ["Write about tide pools"], {"text": "goal"}])
async def test_goal_must_be_text_checked_before_anything(goal: Any) -> None:
    boss, progress = ScriptedModel(["x"]), Progress()
    with pytest.raises(TypeError, match="goal must be text"):
        await orchestrator(on_progress=progress).run_team(team(boss, ScriptedModel()), goal)
    assert boss.requests == []
    assert progress.events == []


async def test_unassigned_tasks_in_a_plan_are_dealt_out() -> None:
    plan = [{"title": "One", "description": "x"}, {"title": "Two", "description": "y"}]
    boss = ScriptedModel([json.dumps(plan), "done"])
    result = await orchestrator().run_team(team(boss, ScriptedModel(every("x"))), "goal")
    assert [t.agent for t in result.tasks] == ["researcher", "writer"]


async def test_failed_tasks_are_reported_to_the_synthesis_and_in_the_result() -> None:
    def reply(request: ScriptedRequest) -> str:
        raise ProviderError("down", provider="scripted", status=400)

    boss = ScriptedModel([json.dumps(PLAN), lambda request: request.last_text])
    result = await orchestrator().run_team(team(boss, ScriptedModel(every(reply))), "goal")
    assert not result.success
    assert [t.status for t in result.tasks] == ["failed", "skipped"]
    assert "failed" in result.output and "skipped" in result.output


async def test_a_failing_coordinator_raises_plan_error() -> None:
    def reply(request: ScriptedRequest) -> str:
        raise ProviderError("invalid key", provider="scripted", status=401)

    with pytest.raises(PlanError, match="failed to plan"):
        await orchestrator().run_team(team(ScriptedModel([reply]), ScriptedModel()), "goal")


async def test_coordinator_retryable_errors_are_retried() -> None:
    def busy(request: ScriptedRequest) -> str:
        raise ProviderError("busy", provider="scripted", status=503, retryable=True)

    boss = ScriptedModel([busy, json.dumps(PLAN)])
    plan = await orchestrator().run_team(team(boss, ScriptedModel()), "goal", plan_only=True)
    assert len(plan) == 2


def test_run_team_sync() -> None:
    boss = ScriptedModel([json.dumps(PLAN), "sync final"])
    result = orchestrator().run_team_sync(team(boss, ScriptedModel(every("x"))), "goal")
    assert result.output == "sync final"
