"""prompt(), continue_run() and add_message(): the agent's conversation history."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from turnkit import Agent, AgentConfig, Message, ToolResultBlock, ToolUseBlock, tool
from turnkit.messages.history import interrupted_result
from turnkit.testing import ScriptedModel


def agent_with(replies: list[Any], **config: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(replies)
    return Agent(AgentConfig("talker", model=model, **config)), model


def texts(agent: Agent) -> list[str]:
    return [m.text for m in agent.get_history()]


async def test_prompt_appends_the_user_turn_and_the_reply() -> None:
    agent, model = agent_with(["Hi Ada.", "Your name is Ada."])
    await agent.prompt("I am Ada.")
    result = await agent.prompt("Who am I?")
    assert result.output == "Your name is Ada."
    assert texts(agent) == ["I am Ada.", "Hi Ada.", "Who am I?", "Your name is Ada."]
    assert [m.text for m in model.requests[1].messages] == texts(agent)[:3]


async def test_continue_run_after_adding_a_tool_result_by_hand() -> None:
    call = ToolUseBlock("c1", "approve_refund", {"amount": 20})
    history = [Message.user("Refund me"), Message.assistant("Asking a person.", call)]
    agent, model = agent_with(["Refund approved."], history=history)
    agent.add_message(Message.user(ToolResultBlock("c1", "approved by Bob")))
    result = await agent.continue_run()
    assert result.output == "Refund approved."
    assert model.requests[0].messages[-1].content == (ToolResultBlock("c1", "approved by Bob"),)
    assert texts(agent)[-1] == "Refund approved."
    assert len(agent.get_history()) == 4


async def test_continue_run_on_empty_history_raises_value_error_before_any_hook() -> None:
    hooks: list[Any] = []
    agent, model = agent_with(["x"], before_run=hooks.append)
    with pytest.raises(ValueError, match="empty"):
        await agent.continue_run()
    assert hooks == [] and model.requests == []


async def test_a_second_history_run_while_one_is_in_progress_raises_runtime_error() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def held(request: Any) -> str:
        started.set()
        await release.wait()
        return "first"

    hooks: list[Any] = []
    agent, model = agent_with([held, "second"], before_run=hooks.append)
    running = asyncio.create_task(agent.prompt("one"))
    await asyncio.wait_for(started.wait(), 5)
    with pytest.raises(RuntimeError, match="already running"):
        await agent.continue_run()
    with pytest.raises(RuntimeError, match="already running"):
        await agent.prompt("two")
    with pytest.raises(RuntimeError, match="already running"):
        agent.add_message(Message.user("sneaked in"))
    assert len(hooks) == 1 and len(model.requests) == 1
    release.set()
    await asyncio.wait_for(running, 5)
    assert texts(agent) == ["one", "first"]
    await agent.continue_run()  # free again once the first one is done
    assert texts(agent)[-1] == "second"


async def test_add_message_replaces_by_id_and_appends_otherwise() -> None:
    agent, _ = agent_with([])
    agent.add_message({"role": "user", "id": "m1", "content": [{"type": "text", "text": "v1"}]})
    agent.add_message(Message.assistant("reply"))
    agent.add_message(Message.user("v2", id="m1"))
    agent.add_message(Message.user("no id"))
    agent.add_message(Message.user("empty id", id=""))
    assert texts(agent) == ["v2", "reply", "no id", "empty id"]
    assert agent.get_history()[0].id == "m1"


async def test_add_message_runs_no_hooks_and_sets_no_invocation_id() -> None:
    hooks: list[Any] = []
    agent, model = agent_with([], before_run=hooks.append, after_run=lambda c, r: hooks.append(r))
    agent.add_message(Message.user("hi"))
    assert hooks == [] and model.requests == []
    assert agent.get_history()[0].invocation_id is None


def slow_tools(fast_done: asyncio.Event, slow_started: asyncio.Event) -> list[Any]:
    @tool
    async def fast() -> str:
        """Returns at once."""
        fast_done.set()
        return "fast result"

    @tool
    async def slow() -> str:
        """Never returns."""
        slow_started.set()
        await asyncio.Event().wait()
        return "never"

    return [fast, slow]


TWO_CALLS = Message.assistant(
    "Working on it.", ToolUseBlock("c1", "fast", {}), ToolUseBlock("c2", "slow", {})
)


async def test_cancelled_prompt_keeps_its_turn_with_interrupted_results() -> None:
    fast_done, slow_started = asyncio.Event(), asyncio.Event()
    agent, _ = agent_with([TWO_CALLS, "resumed"], tools=slow_tools(fast_done, slow_started))
    task = asyncio.create_task(agent.prompt("Do both"))
    await asyncio.wait_for(asyncio.gather(fast_done.wait(), slow_started.wait()), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    history = agent.get_history()
    assert [m.role for m in history] == ["user", "assistant", "user"]
    assert history[2].content == (
        ToolResultBlock("c1", "fast result"),
        interrupted_result(ToolUseBlock("c2", "slow", {})),
    )
    assert len({m.invocation_id for m in history}) == 1
    result = await agent.continue_run()  # the history is consistent: it can resume
    assert result.output == "resumed"


async def test_timeout_around_continue_run_leaves_interrupted_results() -> None:
    fast_done, slow_started = asyncio.Event(), asyncio.Event()
    agent, _ = agent_with(
        [TWO_CALLS], tools=slow_tools(fast_done, slow_started), history=[Message.user("Do both")]
    )
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await agent.continue_run()
    history = agent.get_history()
    assert [m.role for m in history] == ["user", "assistant", "user"]
    assert history[2].content[1].is_error  # type: ignore[union-attr]
    assert "interrupted" in history[2].content[1].content  # type: ignore[union-attr]


async def test_cancelled_during_the_model_call_keeps_just_the_user_turn() -> None:
    started = asyncio.Event()

    async def never(request: Any) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    agent, _ = agent_with([never, "answer"])
    task = asyncio.create_task(agent.prompt("question"))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert texts(agent) == ["question"]
    assert (await agent.continue_run()).output == "answer"


def test_sync_twins_work_without_an_event_loop() -> None:
    agent, _ = agent_with(["one", "two", "three"])
    assert agent.run_sync("fresh").output == "one"
    assert agent.prompt_sync("hello").output == "two"
    assert agent.continue_run_sync().output == "three"
    assert texts(agent) == ["hello", "two", "three"]


async def test_sync_twins_work_inside_a_running_event_loop() -> None:
    loop_thread = threading.get_ident()
    threads: list[int] = []

    def where(request: Any) -> str:
        threads.append(threading.get_ident())
        return "two"

    agent, _ = agent_with(["one", where])
    assert agent.run_sync("fresh").output == "one"
    assert agent.prompt_sync("hello").output == "two"
    assert threads and threads[0] != loop_thread
    assert texts(agent) == ["hello", "two"]


async def test_sync_twin_raises_the_same_errors() -> None:
    agent, _ = agent_with([])
    with pytest.raises(ValueError, match="empty"):
        agent.continue_run_sync()
