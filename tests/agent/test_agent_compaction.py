"""AgentConfig(compaction=...): what the model gets stays bounded, the history keeps all."""

from __future__ import annotations

from typing import Any

import pytest

from turnkit import (
    Agent,
    AgentConfig,
    Compaction,
    ContextTooLongError,
    Message,
    ToolResultBlock,
    ToolUseBlock,
    default_convert_to_llm,
    tool,
)
from turnkit.agent.compaction import conversation_view
from turnkit.backends import ProcessBackend
from turnkit.providers import Model, ModelRequest, ModelResponse, Usage
from turnkit.testing import ScriptedModel

LINE = "x" * 40  # 10 tokens by the characters / 4 estimate


def agent_with(
    replies: list[Any], compaction: Compaction, **config: Any
) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(replies, context_window=config.pop("context_window", None))
    return Agent(AgentConfig("talker", model=model, compaction=compaction, **config)), model


async def test_prompt_sends_a_bounded_conversation_and_keeps_every_message() -> None:
    summariser = ScriptedModel([f"Summary {i}." for i in range(10)])
    compaction = Compaction(max_tokens=45, keep_last=2, model=summariser)
    agent, model = agent_with([f"{LINE} {i}" for i in range(12)], compaction)
    for i in range(12):
        result = await agent.prompt(f"{LINE} question {i}")
        assert result.success, result.error

    assert max(len(request.messages) for request in model.requests) <= 4
    assert len(summariser.requests) >= 3
    later = summariser.requests[-1].messages[0].text
    assert "Summary of the conversation before this point" in later  # a summary of a summary
    history = agent.get_history()
    standard = [m for m in history if m.type == "standard"]
    assert len(standard) == 24 and standard[0].text == f"{LINE} question 0"
    assert [m.text for m in history if m.type == "compaction"] == [
        f"Summary {i}." for i in range(len(summariser.requests))
    ]
    # the last request is what the stored history shows from its latest summary on
    assert list(model.requests[-1].messages) == default_convert_to_llm(
        conversation_view(history[:-1])
    )


async def test_the_model_sees_the_summary_as_default_convert_to_llm_turns_it() -> None:
    summariser = ScriptedModel(["They talked."])
    history = [Message.user(LINE), Message.assistant(LINE)] * 3
    agent, model = agent_with(
        ["ok"], Compaction(max_tokens=20, keep_last=2, model=summariser), history=history
    )
    await agent.prompt("next")
    first = model.requests[0].messages[0]
    assert first.role == "user"
    assert first.text.endswith("<summary>\nThey talked.\n</summary>")
    assert [m.text for m in model.requests[0].messages[1:]] == [LINE, "next"]
    summary = agent.get_history()[5]
    assert summary.type == "compaction"
    assert summary.metadata["replaced"] == 5
    assert summary.metadata["tokens_before"] > summary.metadata["tokens_after"]


class Reporting(Model):
    """Replies "ok" and reports ``input_tokens`` for every request."""

    provider = "reporting"
    name = "reporting"

    def __init__(self, input_tokens: int) -> None:
        self.input_tokens = input_tokens
        self.requests: list[ModelRequest] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return ModelResponse(Message.assistant("ok"), Usage(self.input_tokens, 1))


async def test_the_reported_input_tokens_of_the_last_reply_decide() -> None:
    summariser = ScriptedModel(["Summary."])
    model = Reporting(input_tokens=9_000)
    compaction = Compaction(max_tokens=5_000, keep_last=1, model=summariser)
    agent = Agent(AgentConfig("talker", model=model, compaction=compaction))
    await agent.prompt("short")  # a few characters: no compaction
    assert summariser.requests == []
    await agent.prompt("short again")  # the provider said 9,000 tokens
    assert len(summariser.requests) == 1
    assert [m.text for m in model.requests[1].messages[1:]] == ["short again"]


async def test_a_failing_summariser_goes_on_uncompacted_when_the_window_is_unknown() -> None:
    def fail(request: object) -> str:
        raise RuntimeError("summariser is down")

    history = [Message.user(LINE), Message.assistant(LINE)] * 3
    compaction = Compaction(max_tokens=20, keep_last=2, model=ScriptedModel([fail]))
    agent, model = agent_with(["ok"], compaction, history=history)
    result = await agent.prompt("next")
    assert result.success
    assert len(model.requests[0].messages) == 7  # everything, uncompacted
    assert all(m.type == "standard" for m in agent.get_history())


async def test_an_empty_summary_fails_the_prompt_when_over_the_window() -> None:
    history = [Message.user(LINE), Message.assistant(LINE)] * 3
    compaction = Compaction(max_tokens=20, keep_last=2, model=ScriptedModel([""]))
    agent, model = agent_with(["ok"], compaction, history=history, context_window=40)
    result = await agent.prompt("next")
    assert not result.success
    assert result.stop_reason == "context_too_long"
    assert isinstance(result.exception, ContextTooLongError)
    assert "context window" in (result.error or "")
    assert model.requests == []  # the call was not made
    assert agent.get_history() == history  # a failed prompt leaves the history as it was


async def test_a_run_sends_its_input_compacted() -> None:
    summariser = ScriptedModel(["Earlier."])
    agent, model = agent_with(["ok"], Compaction(max_tokens=20, keep_last=1, model=summariser))
    messages = [Message.user(LINE), Message.assistant(LINE)] * 3 + [Message.user("now")]
    result = await agent.run(messages)
    assert result.success and result.messages[-1].text == "ok"
    assert [m.text for m in model.requests[0].messages][1:] == ["now"]
    assert agent.get_history() == []  # run() is fresh


@tool
def fetch(page: int) -> str:
    """A long page of text."""
    return "y" * 200


async def test_a_long_tool_loop_is_compacted_between_calls_and_stored_in_place() -> None:
    calls = [Message.assistant(ToolUseBlock(f"c{i}", "fetch", {"page": i})) for i in range(3)]
    summariser = ScriptedModel(["Fetched pages 0 and 1."])
    compaction = Compaction(max_tokens=150, keep_last=2, model=summariser)
    agent, model = agent_with([*calls, "done"], compaction, tools=[fetch])
    result = await agent.prompt("go")
    assert result.success and result.output == "done"

    assert len(summariser.requests) == 1
    last = model.requests[-1].messages
    assert "Fetched pages 0 and 1." in last[0].text
    assert last[1].content == calls[2].content  # the third call and its result
    history = agent.get_history()
    assert [m.type for m in history].count("compaction") == 1
    assert history[5].type == "compaction"  # before the kept call, after what it replaced
    assert all(m.type == "standard" for m in result.messages)


def test_a_compaction_that_is_not_a_compaction_is_refused() -> None:
    with pytest.raises(TypeError, match=r"AgentConfig\.compaction"):
        Agent(AgentConfig("a", model=ScriptedModel([]), compaction={"max_tokens": 5}))  # type: ignore[arg-type]


def test_compaction_with_a_backend_is_refused() -> None:
    backend = ProcessBackend(["cat"])
    with pytest.raises(ValueError, match=r"AgentConfig\.compaction"):
        Agent(AgentConfig("a", backend=backend, compaction=Compaction(100)))


async def test_a_compacted_prompt_stops_for_approval_and_continues_with_approvals() -> None:
    refunds: list[str] = []

    @tool(needs_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        refunds.append(order_id)
        return f"refunded {order_id}"

    @tool
    def lookup(order_id: str) -> str:
        """Look an order up."""
        return f"order {order_id}: paid 50"

    asking = Message.assistant(
        ToolUseBlock("c1", "lookup", {"order_id": "42"}),
        ToolUseBlock("c2", "refund", {"order_id": "42"}),
    )
    summariser = ScriptedModel(["They talked.", "They talked, then a refund."])
    history = [Message.user(LINE), Message.assistant(LINE)] * 6
    agent, model = agent_with(
        [asking, "Refunded."],
        Compaction(max_tokens=45, keep_last=2, model=summariser),
        history=history,
        tools=[refund, lookup],
    )

    held = await agent.prompt("refund order 42")
    assert held.success and held.stop_reason == "approval_required"
    assert [a.call_id for a in held.approvals] == ["c2"]
    assert refunds == []
    assert len(summariser.requests) == 1  # the first request was compacted
    assert "They talked." in model.requests[0].messages[0].text
    stored = agent.get_history()
    assert [m.type for m in stored].count("compaction") == 1
    partial = stored[-1]
    assert [b.tool_use_id for b in partial.content if isinstance(b, ToolResultBlock)] == ["c1"]

    done = await agent.continue_run(approvals={"c2": True})
    assert done.success, done.error
    assert done.output == "Refunded." and refunds == ["42"]
    resumed = model.requests[-1].messages
    assert resumed[0].text.startswith("The earlier part of this conversation was compacted")
    assert resumed[-1].content[-1].content == "refunded 42"  # the answer, both results
    final = agent.get_history()
    assert [m for m in final if m.id == partial.id] == [final[-2]]  # replaced, not kept twice
    answer = final[-2]
    assert [b.tool_use_id for b in answer.content] == ["c1", "c2"]
    assert final[-1].text == "Refunded."
    standard = [m for m in final if m.type == "standard"]
    assert len(standard) == len(history) + 4  # prompt, calls, answer, reply
    # the resumed run compacted again (a summary of the summary), stored in place
    # although the run dropped the partial answer ending its input
    assert [m.text for m in final if m.type == "compaction"] == [
        "They talked.",
        "They talked, then a refund.",
    ]
    assert final[-4].type == "compaction"  # before the kept call and its answer
    assert final[-3].content == asking.content
