"""The loop: model calls, tool round trips, limits, failures and streaming."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

from turnkit import (
    Agent,
    AgentConfig,
    ImageBlock,
    Message,
    StreamEvent,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    tool,
)
from turnkit.agent import resolve_agent_model
from turnkit.errors import ProviderError
from turnkit.providers import Model, ModelRequest, ModelResponse
from turnkit.testing import ScriptedModel

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n chart").decode()


def calls(*items: tuple[str, str, dict[str, Any]]) -> Message:
    """An assistant message calling tools: (id, name, input) each."""
    return Message.assistant(*(ToolUseBlock(i, name, args) for i, name, args in items))


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def chart(title: str) -> list[Any]:
    """Draw a chart."""
    return [
        TextBlock(f"Chart: {title}"),
        ImageBlock({"type": "base64", "media_type": "image/png", "data": PNG}),
    ]


def agent_with(replies: list[Any], **config: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(replies)
    return Agent(AgentConfig("looper", model=model, **config)), model


def results_of(message: Message) -> list[ToolResultBlock]:
    return [b for b in message.content if isinstance(b, ToolResultBlock)]


async def test_single_turn_run_returns_output_usage_and_stop_reason() -> None:
    agent, model = agent_with(["Paris."], system="Be brief.", temperature=0.2, max_output_tokens=50)
    result = await agent.run("Capital of France?")
    assert (result.success, result.output, result.stop_reason, result.error) == (
        True,
        "Paris.",
        "end_turn",
        None,
    )
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0
    (request,) = model.requests
    assert request.system == "Be brief."
    assert (request.settings.temperature, request.settings.max_output_tokens) == (0.2, 50)
    assert agent.get_history() == []


async def test_every_message_a_run_adds_carries_a_fresh_invocation_id() -> None:
    agent, _ = agent_with([calls(("c1", "add", {"a": 1, "b": 2})), "3", "again"], tools=[add])
    first = await agent.prompt("1+2?")
    second = await agent.prompt("again")
    history = agent.get_history()
    ids = {m.invocation_id for m in history[:4]}
    assert len(ids) == 1 and None not in ids
    assert {m.invocation_id for m in first.messages} == ids
    assert second.messages[0].invocation_id not in ids | {None}


async def test_tool_round_trip_with_sync_async_and_image_tools() -> None:
    replies = [
        calls(("c1", "add", {"a": 2, "b": 3}), ("c2", "chart", {"title": "sales"})),
        "The sum is 5 and here is the chart.",
    ]
    agent, model = agent_with(replies, tools=[add, chart])
    result = await agent.run("Go")
    assert result.success
    assert [m.role for m in result.messages] == ["assistant", "user", "assistant"]
    answer = result.messages[1]
    assert results_of(answer)[0] == ToolResultBlock("c1", "5")
    assert results_of(answer)[1].content[1].source.data == PNG  # type: ignore[union-attr]
    assert model.requests[0].tool_names == ("add", "chart")
    assert model.requests[0].tools[0].input_schema["required"] == ("a", "b")
    assert model.requests[1].messages[-1] == answer


async def test_tool_errors_go_back_to_the_model_as_error_results() -> None:
    @tool
    def fail() -> str:
        """Always fails."""
        raise RuntimeError("disk full")

    replies = [
        calls(("c1", "add", {"a": "x", "b": 1}), ("c2", "fail", {}), ("c3", "missing", {})),
        "Sorry.",
    ]
    agent, model = agent_with(replies, tools=[add, fail])
    result = await agent.run("Go")
    assert result.success
    errors = results_of(model.requests[1].messages[-1])
    assert [r.is_error for r in errors] == [True, True, True]
    assert errors[0].content.startswith("Invalid input for tool 'add': a: Input should be")
    assert errors[1].content == "Tool 'fail' failed: RuntimeError: disk full"
    assert errors[2].content == "Unknown tool 'missing'. Available tools: add, fail."


async def test_concurrent_tool_calls_keep_call_order() -> None:
    slow_may_finish = asyncio.Event()
    both_started = asyncio.Barrier(2)

    @tool
    async def slow() -> str:
        """Finishes last."""
        await both_started.wait()
        await slow_may_finish.wait()
        return "slow"

    @tool
    async def fast() -> str:
        """Finishes first, and lets slow finish."""
        await both_started.wait()
        slow_may_finish.set()
        return "fast"

    agent, _ = agent_with(
        [calls(("c1", "slow", {}), ("c2", "fast", {})), "done"], tools=[slow, fast]
    )
    result = await asyncio.wait_for(agent.run("Go"), 5)
    assert [r.content for r in results_of(result.messages[1])] == ["slow", "fast"]


async def test_plain_functions_in_config_become_tools() -> None:
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    agent, _ = agent_with([calls(("c1", "shout", {"text": "hi"})), "ok"], tools=[shout])
    result = await agent.run("Go")
    assert results_of(result.messages[1])[0].content == "HI"
    assert agent.tools[0].name == "shout"


async def test_max_turns_stops_the_run_with_every_call_answered() -> None:
    replies = [calls((f"c{i}", "add", {"a": i, "b": 1})) for i in range(3)]
    agent, model = agent_with(replies, tools=[add], max_turns=2)
    result = await agent.prompt("Loop forever")
    assert (result.success, result.stop_reason) == (False, "max_turns")
    assert result.error == (
        "The run stopped after 2 model turns (max_turns) without a final answer."
    )
    assert len(model.requests) == 2
    assert [m.role for m in result.messages] == ["assistant", "user", "assistant", "user"]
    assert results_of(result.messages[-1]) == [ToolResultBlock("c1", "2")]
    assert agent.get_history() == []


async def test_model_error_fails_the_run_and_leaves_prompt_history_unchanged() -> None:
    class Broken(Model):
        provider, name = "broken", "x"

        async def request(self, request: ModelRequest) -> ModelResponse:
            raise ProviderError("overloaded", provider="broken", status=529, retryable=True)

    agent = Agent(AgentConfig("a", model=Broken(), history=[Message.user("old")]))
    result = await agent.prompt("new")
    assert not result.success
    assert (result.stop_reason, result.output) == ("error", "")
    assert result.error == "ProviderError: broken 529: overloaded"
    assert agent.get_history() == [Message.user("old")]


async def test_model_error_after_tool_turns_keeps_them_in_the_result_only() -> None:
    agent, _ = agent_with([calls(("c1", "add", {"a": 1, "b": 1}))], tools=[add])
    result = await agent.prompt("go")
    assert not result.success
    assert "ScriptExhaustedError" in (result.error or "")
    assert [m.role for m in result.messages] == ["assistant", "user"]
    assert agent.get_history() == []


async def test_a_reused_tool_call_id_fails_the_run() -> None:
    reply = calls(("same", "add", {"a": 1, "b": 1}))
    agent, _ = agent_with([reply, reply], tools=[add])
    result = await agent.run("go")
    assert not result.success
    assert result.error == "the model reused tool_use id 'same' from earlier in the conversation"


async def test_transform_context_and_convert_to_llm_shape_every_request() -> None:
    seen: list[int] = []

    async def keep_last_two(messages: list[Message]) -> list[Message]:
        seen.append(len(messages))
        return messages[-2:]

    def tag(messages: list[Message]) -> list[dict[str, Any]]:
        return [{**m.to_dict(), "metadata": {"tagged": True}} for m in messages]

    history = [Message.user("a"), Message.assistant("b"), Message.user("c"), Message.assistant("d")]
    agent, model = agent_with(
        [calls(("c1", "add", {"a": 1, "b": 1})), "2"],
        tools=[add],
        history=history,
        transform_context=keep_last_two,
        convert_to_llm=tag,
    )
    await agent.prompt("e")
    assert seen == [5, 7]
    assert [m.text for m in model.requests[0].messages] == ["d", "e"]
    assert all(m.metadata == {"tagged": True} for m in model.requests[1].messages)
    assert len(agent.get_history()) == 8  # history itself is not transformed


async def test_default_conversion_turns_summaries_into_user_text_and_skips_custom() -> None:
    agent, model = agent_with(["ok"])
    await agent.run(
        [
            {"role": "user", "type": "compaction", "content": [{"type": "text", "text": "S"}]},
            {"role": "user", "type": "custom", "content": [{"type": "text", "text": "hidden"}]},
            {"role": "user", "content": [{"type": "text", "text": "Q"}]},
        ]
    )
    sent = model.requests[0].messages
    assert len(sent) == 2 and "<summary>\nS\n</summary>" in sent[0].text


async def test_stream_delivers_deltas_tool_events_messages_and_done_last() -> None:
    replies = [
        Message.assistant(
            {"type": "thinking", "thinking": "Let me add."},
            "Adding now.",
            ToolUseBlock("c1", "add", {"a": 1, "b": 2}),
        ),
        "The answer is 3.",
    ]
    agent, _ = agent_with(replies, tools=[add])
    events: list[StreamEvent] = [event async for event in agent.stream("1+2?")]
    types = [e.type for e in events]
    assert types[0] == "thinking_delta" and events[0].text == "Let me add."
    assert types.count("done") == 1 and types[-1] == "done"
    assert "error" not in types
    tool_use = next(e for e in events if e.type == "tool_use")
    assert tool_use.block == ToolUseBlock("c1", "add", {"a": 1, "b": 2})
    tool_result = next(e for e in events if e.type == "tool_result")
    assert tool_result.block == ToolResultBlock("c1", "3")
    messages = [e.message for e in events if e.type == "message"]
    result = events[-1].result
    assert result is not None and tuple(messages) == result.messages
    final_deltas = "".join(
        e.text for e in events[types.index("tool_result") :] if e.type == "text_delta"
    )
    assert final_deltas == result.output == "The answer is 3."
    assert types.index("tool_use") < types.index("tool_result")


async def test_stream_reports_a_failed_run_with_an_error_event_then_done() -> None:
    agent, _ = agent_with([])
    events = [event async for event in agent.stream("hi")]
    assert [e.type for e in events] == ["error", "done"]
    assert events[0].error == events[1].result.error  # type: ignore[union-attr]


async def test_stream_can_be_abandoned_early() -> None:
    agent, model = agent_with(["one two three"])
    stream = agent.stream("hi")
    async for event in stream:
        assert event.type == "text_delta"
        break
    await stream.aclose()  # type: ignore[attr-defined]
    assert len(model.requests) == 1


async def test_run_is_fresh_and_may_overlap_with_a_prompt() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def held(request: Any) -> str:
        started.set()
        await release.wait()
        return "prompt reply"

    agent, model = agent_with([held, "run reply"], history=[Message.user("old")])
    prompting = asyncio.create_task(agent.prompt("new"))
    await asyncio.wait_for(started.wait(), 5)
    result = await agent.run("independent")
    assert result.output == "run reply"
    assert [m.text for m in model.requests[1].messages] == ["independent"]
    release.set()
    await asyncio.wait_for(prompting, 5)
    assert [m.text for m in agent.get_history()] == ["old", "new", "prompt reply"]


def test_config_errors_raise_when_the_agent_is_built() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        Agent(AgentConfig("a", max_turns=0))
    with pytest.raises(ValueError, match="name"):
        Agent(AgentConfig(""))
    with pytest.raises(ValueError, match="two tools are named 'add'"):
        Agent(AgentConfig("a", tools=[add, add]))
    with pytest.raises(TypeError, match="Tool or a function"):
        Agent(AgentConfig("a", tools=["add"]))  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"AgentConfig\.backend must be a turnkit\.backends"):
        Agent(AgentConfig("a", backend=object()))


def test_model_resolution_goes_through_one_function() -> None:
    model = ScriptedModel([])
    assert resolve_agent_model(model) is model
    assert resolve_agent_model(None, default=model) is model
    other = ScriptedModel([])
    assert resolve_agent_model(other, default=model) is other


async def test_thinking_replay_and_image_policy_reach_the_request() -> None:
    from turnkit import ImagePolicy, ThinkingBlock
    from turnkit.messages import Origin

    foreign = Message.assistant(ThinkingBlock("hmm", "sig"), "Hi", origin=Origin("other", "m"))
    policy = ImagePolicy(max_bytes=1000)
    model = ScriptedModel(["ok"])
    agent = Agent(
        AgentConfig("a", model=model, history=[Message.user("q"), foreign], thinking_replay="text")
    )
    agent2 = Agent(AgentConfig("b", model=model, image_policy=policy))
    await agent.prompt("more")
    assert model.requests[0].messages[1].content[0] == TextBlock("<thinking>\nhmm\n</thinking>")
    assert agent2._loop.settings.image_policy is policy
    with pytest.raises(ValueError, match="thinking_replay"):
        Agent(AgentConfig("c", model=model, thinking_replay="keep"))  # type: ignore[arg-type]
