"""Budgets: checked before every model call, shared by a whole team run."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes import FakeAnthropic, Reply, ToolCall
from fakes.models import REMOTES
from turnkit import (
    AgentConfig,
    Budget,
    CostBudgetExceededError,
    Message,
    Orchestrator,
    Task,
    Team,
    TokenBudgetExceededError,
    ToolUseBlock,
    tool,
)
from turnkit.orchestrator import TraceEvent, price_for
from turnkit.testing import ScriptedModel

from ._support import Progress, echo_task, every


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def looping(calls: int) -> list[Any]:
    """``calls`` turns that each call a tool, then a final answer."""
    replies: list[Any] = [
        Message.assistant(ToolUseBlock(f"c{i}", "lookup", {"q": str(i)})) for i in range(calls)
    ]
    return [*replies, "final"]


async def test_token_budget_refuses_the_call_after_the_one_that_reached_it() -> None:
    progress, model = Progress(), ScriptedModel(looping(5))
    orch = Orchestrator(model, budget=Budget(max_tokens=1), on_progress=progress)
    with pytest.raises(TokenBudgetExceededError) as caught:
        await orch.run_agent(AgentConfig("a", tools=[lookup]), "go")
    assert len(model.requests) == 1  # the first call spent the budget; the second was refused
    assert caught.value.limit == 1
    assert caught.value.spent >= 1
    assert progress.types() == ["agent_start", "budget_exceeded", "error"]
    exceeded = progress.of("budget_exceeded")[0]
    assert exceeded.agent == "a"
    assert exceeded.data["kind"] == "tokens"
    assert exceeded.data["limit"] == 1
    assert exceeded.data["model"] == "scripted:scripted"


async def test_a_budget_overshoots_by_at_most_one_call() -> None:
    calls: list[int] = []  # tokens of each model call, from the chat spans

    def on_trace(event: TraceEvent) -> None:
        if event.attributes.get("gen_ai.operation.name") == "chat":
            usage = event.attributes
            calls.append(usage["gen_ai.usage.input_tokens"] + usage["gen_ai.usage.output_tokens"])

    model = ScriptedModel(looping(10))
    orch = Orchestrator(model, budget=Budget(max_tokens=30), on_trace=on_trace)
    with pytest.raises(TokenBudgetExceededError) as caught:
        await orch.run_agent(AgentConfig("a", tools=[lookup]), "go")
    assert len(calls) == len(model.requests) >= 2
    assert sum(calls[:-1]) < 30 <= sum(calls) == caught.value.spent


async def test_zero_budget_refuses_the_first_call() -> None:
    model = ScriptedModel(["never"])
    with pytest.raises(TokenBudgetExceededError):
        await Orchestrator(model, budget=Budget(max_tokens=0)).run_agent(AgentConfig("a"), "x")
    assert model.requests == []


async def test_a_run_within_budget_is_untouched() -> None:
    model = ScriptedModel(looping(2))
    orch = Orchestrator(model, budget=Budget(max_tokens=10_000))
    result = await orch.run_agent(AgentConfig("a", tools=[lookup]), "go")
    assert result.output == "final"


async def test_cost_uses_a_custom_price_per_million_tokens() -> None:
    progress = Progress()
    orch = Orchestrator(
        ScriptedModel(["Paris."]), prices={"scripted:scripted": (2.0, 8.0)}, on_progress=progress
    )
    result = await orch.run_agent(AgentConfig("a"), "Capital of France?")
    expected = (result.usage.input_tokens * 2.0 + result.usage.output_tokens * 8.0) / 1e6
    assert progress.of("agent_complete")[0].data["cost_usd"] == pytest.approx(expected)


async def test_cost_budget_refuses_the_next_call() -> None:
    progress, model = Progress(), ScriptedModel(looping(3))
    orch = Orchestrator(
        model,
        budget=Budget(max_cost_usd=0.5),
        prices={"scripted:scripted": (1_000_000.0, 0.0)},  # $1 per input token
        on_progress=progress,
    )
    with pytest.raises(CostBudgetExceededError) as caught:
        await orch.run_agent(AgentConfig("a", tools=[lookup]), "go")
    assert len(model.requests) == 1
    assert caught.value.limit == 0.5
    assert progress.of("budget_exceeded")[0].data["kind"] == "cost"


async def test_a_cost_budget_needs_a_price_for_the_model() -> None:
    model = ScriptedModel(["x"])
    orch = Orchestrator(model, budget=Budget(max_cost_usd=1.0))
    with pytest.raises(ValueError, match=r"no price is known for model 'scripted:scripted'"):
        await orch.run_agent(AgentConfig("a"), "x")
    assert model.requests == []


def test_built_in_prices_match_dated_versions_and_can_be_overridden() -> None:
    assert price_for("anthropic:claude-sonnet-4-5-20250929") == (3.0, 15.0, 0.3, 3.75)
    assert price_for("openai:gpt-4o-mini-2024-07-18") == (0.15, 0.6, 0.075, 0.15)
    assert price_for("openai:gpt-4o-2024-08-06") == (2.5, 10.0, 1.25, 2.5)
    assert price_for("openai-responses:gpt-5") == (1.25, 10.0, 0.125, 1.25)
    assert price_for("local:smollm2") == (0.0, 0.0)
    assert price_for("openai:gpt-4o", {"openai:gpt-4o": (1, 2)}) == (1.0, 2.0)
    assert price_for("acme:mystery") is None
    with pytest.raises(ValueError, match="prices"):
        price_for("acme:x", {"acme:x": (-1, 2)})


def test_budget_limits_are_checked() -> None:
    with pytest.raises(ValueError):
        Budget(max_tokens=-1)
    with pytest.raises(ValueError):
        Budget(max_cost_usd=float("nan"))


async def test_a_team_shares_one_budget_the_refused_task_fails_and_the_rest_are_skipped() -> None:
    progress, model = Progress(), ScriptedModel(every(echo_task))
    tasks = [
        Task("A", "first"),
        Task("B", "second", depends_on=["A"]),
        Task("C", "third", depends_on=["A"]),
    ]
    orch = Orchestrator(budget=Budget(max_tokens=1), max_concurrency=1, on_progress=progress)
    result = await orch.run_tasks(Team([AgentConfig("w", model=model)]), tasks)
    assert len(model.requests) == 1
    status = {t.title: t.status for t in result.tasks}
    assert status == {"A": "completed", "B": "failed", "C": "skipped"}
    assert "TokenBudgetExceededError" in (result.task("B").error or "")
    assert "budget ran out" in (result.task("C").error or "")
    assert not result.success and "budget" in (result.error or "")
    assert len(progress.of("budget_exceeded")) == 1
    assert [e.task for e in progress.of("error")] == ["B"]  # one error event per failure
    assert progress.of("task_retry") == []  # budget errors are not retried


async def test_budget_spent_while_planning_raises_from_run_team() -> None:
    plan = [{"title": "A", "description": "x"}]
    boss = ScriptedModel(["not json", json.dumps(plan)])
    team = Team([AgentConfig("w", model=ScriptedModel())], AgentConfig("boss", model=boss))
    with pytest.raises(TokenBudgetExceededError):
        await Orchestrator(budget=Budget(max_tokens=1)).run_team(team, "goal")
    assert len(boss.requests) == 1  # the corrective call was refused


async def test_budget_spent_before_the_synthesis_keeps_the_task_outputs() -> None:
    plan = [{"title": "A", "description": "x"}]
    boss = ScriptedModel([json.dumps(plan), "never"])
    long_answer = "word " * 2000  # 2,500 tokens by the scripted estimate
    workers = ScriptedModel([long_answer])
    team = Team([AgentConfig("w", model=workers)], AgentConfig("boss", model=boss))
    result = await Orchestrator(budget=Budget(max_tokens=2000)).run_team(team, "goal")
    assert result.task("A").output == long_answer
    assert result.output == ""
    assert not result.success and "budget ran out" in (result.error or "")
    assert len(boss.requests) == 1  # planning only: the synthesis was refused


async def test_each_top_level_call_has_its_own_budget() -> None:
    model = ScriptedModel(every("ok"))
    orch = Orchestrator(model, budget=Budget(max_tokens=1))
    await orch.run_agent(AgentConfig("a"), "one")
    await orch.run_agent(AgentConfig("a"), "two")  # a fresh budget: the first call runs
    assert len(model.requests) == 2


async def test_a_team_with_a_cost_budget_and_an_unpriced_model_is_refused_up_front() -> None:
    priced, unpriced = ScriptedModel(every("ok"), name="cheap"), ScriptedModel(every("ok"))
    team = Team([AgentConfig("a", model=priced), AgentConfig("b", model=unpriced)])
    orch = Orchestrator(budget=Budget(max_cost_usd=1.0), prices={"scripted:cheap": (1.0, 1.0)})
    with pytest.raises(ValueError, match=r"no price is known for 'scripted:scripted'"):
        await orch.run_tasks(team, [Task("A", "x", assignee="a"), Task("B", "y", assignee="b")])
    assert priced.requests == [] and unpriced.requests == []
    boss = ScriptedModel(["never"], name="boss")
    team = Team([AgentConfig("a", model=priced)], AgentConfig("boss", model=boss))
    with pytest.raises(ValueError, match=r"no price is known for 'scripted:boss'"):
        await orch.run_team(team, "goal")
    assert boss.requests == []


async def test_a_cached_conversation_reaches_its_budget_at_the_right_call() -> None:
    # Each call reads 1000 tokens from Anthropic's prompt cache, on top of 10
    # fresh input tokens and 5 output tokens: 1015 tokens a call.
    cached = Reply([ToolCall("lookup", {"q": "x"})], usage=(10, 5, 1000, 0))
    with FakeAnthropic(*[cached] * 5) as fake:
        model = REMOTES["anthropic"].model(fake)
        orch = Orchestrator(model, budget=Budget(max_tokens=2500))
        with pytest.raises(TokenBudgetExceededError) as caught:
            await orch.run_agent(AgentConfig("a", tools=[lookup]), "go")
        assert len(fake.requests) == 3  # 1015, 2030, then 3045 >= 2500: the 4th is refused
    assert caught.value.spent == 3045


async def test_cached_tokens_cost_their_own_price() -> None:
    first = Reply("cached", usage=(100, 10, 0, 1_000_000))  # writes a million tokens
    second = Reply("cached", usage=(100, 10, 1_000_000, 0))  # then reads them
    progress = Progress()
    with FakeAnthropic(first, second) as fake:
        orch = Orchestrator(REMOTES["anthropic"].model(fake), on_progress=progress)
        write = await orch.run_agent(AgentConfig("a"), "go")
        await orch.run_agent(AgentConfig("a"), "go")
    fresh = (100 * 3.0 + 10 * 15.0) / 1e6  # claude-sonnet-4-6 is priced as claude-sonnet-4
    assert write.usage.cache_write_tokens == 1_000_000
    costs = [event.data["cost_usd"] for event in progress.of("agent_complete")]
    assert costs == [pytest.approx(fresh + 3.75), pytest.approx(fresh + 0.3)]
