"""Input is validated before anything happens, and never aliased with the caller's data."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from turnkit import Agent, AgentConfig, InvalidMessageError, Message, RunContext
from turnkit.testing import ScriptedModel

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n first image").decode()
OTHER_PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n other image").decode()


def image(data: str = PNG) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


class Recorder:
    """An agent whose hooks and model record every call."""

    def __init__(self, replies: list[Any] | None = None, **config: Any) -> None:
        self.hook_calls: list[str] = []
        self.model = ScriptedModel(replies or ["ok"] * 5)
        self.agent = Agent(
            AgentConfig(
                "recorder",
                model=self.model,
                before_run=lambda ctx: self.hook_calls.append("before"),
                after_run=lambda ctx, result: self.hook_calls.append("after"),
                **config,
            )
        )

    def assert_nothing_happened(self, history: list[Message] | None = None) -> None:
        assert self.hook_calls == []
        assert self.model.requests == []
        assert self.agent.get_history() == (history or [])


BAD_MESSAGES = [
    (42, "input: expected a string or a list of messages, got a number"),
    ({"role": "user"}, "input: expected a string or a list of messages, got an object"),
    ([], "messages: expected at least one message"),
    ([{"role": "bot", "content": []}], "messages[0].role"),
    ([{"role": "user", "content": "hi"}], "messages[0].content: expected a list"),
    (
        [{"role": "user", "content": [{"type": "text", "text": "a"}, image("not base64!")]}],
        "messages[0].content[1].source.data",
    ),
    (
        [{"role": "user", "content": [{"type": "tool_use", "id": "x", "name": "t", "input": {}}]}],
        "messages[0].content[0]: a tool_use block is not allowed in",
    ),
]


@pytest.mark.parametrize(("value", "path"), BAD_MESSAGES)
async def test_run_with_invalid_input_raises_before_any_hook_or_model_call(
    value: Any, path: str
) -> None:
    recorder = Recorder()
    with pytest.raises(InvalidMessageError) as caught:
        await recorder.agent.run(value)
    assert str(caught.value).startswith(path)
    assert caught.value.code == "INVALID_MESSAGE"
    recorder.assert_nothing_happened()


@pytest.mark.parametrize(("value", "path"), BAD_MESSAGES)
def test_stream_with_invalid_input_raises_when_called(value: Any, path: str) -> None:
    recorder = Recorder()
    with pytest.raises(InvalidMessageError) as caught:
        recorder.agent.stream(value)  # no iteration, no event loop: it raises right here
    assert str(caught.value).startswith(path)
    recorder.assert_nothing_happened()


BAD_BLOCKS = [
    (["a string item", {"type": "text", "text": "x"}], "blocks[0]: expected a content block"),
    ([{"type": "text", "text": "x"}, "tail"], "blocks[1]: expected a content block"),
    ([], "blocks: expected at least one content block"),
    (None, "input: expected a string or a list of content blocks, got null"),
    ([{"type": "thinking", "thinking": "hm"}], "blocks[0]: a thinking block is not allowed"),
    ([image("bad")], "blocks[0].source.data"),
    ([{"role": "user", "content": []}], "blocks[0]"),
]


@pytest.mark.parametrize(("value", "path"), BAD_BLOCKS)
async def test_prompt_with_invalid_blocks_leaves_history_unchanged(value: Any, path: str) -> None:
    history = [Message.user("earlier"), Message.assistant("reply")]
    recorder = Recorder(history=history)
    with pytest.raises(InvalidMessageError) as caught:
        await recorder.agent.prompt(value)
    assert str(caught.value).startswith(path)
    recorder.assert_nothing_happened(history)


def test_add_message_with_invalid_message_raises_and_changes_nothing() -> None:
    recorder = Recorder(history=[Message.user("kept")])
    with pytest.raises(InvalidMessageError, match=r"^message\.content\[0\]\.text"):
        recorder.agent.add_message({"role": "user", "content": [{"type": "text", "text": 1}]})
    with pytest.raises(InvalidMessageError, match=r"^message: expected a message object"):
        recorder.agent.add_message("hi")  # type: ignore[arg-type]
    recorder.assert_nothing_happened([Message.user("kept")])


def test_add_message_refuses_a_tool_use_id_already_in_history() -> None:
    call = {"type": "tool_use", "id": "call_1", "name": "t", "input": {}}
    recorder = Recorder(history=[Message.user("go"), Message.assistant(call)])
    with pytest.raises(InvalidMessageError, match="duplicate tool_use id 'call_1'"):
        recorder.agent.add_message({"role": "assistant", "content": [call]})
    assert len(recorder.agent.get_history()) == 2


def test_invalid_history_raises_when_the_agent_is_built() -> None:
    with pytest.raises(InvalidMessageError, match=r"^history\[1\]\.role"):
        Agent(AgentConfig("a", history=[Message.user("hi"), {"role": "robot", "content": []}]))


class CallerData:
    """A caller's input, which it keeps changing while and after the agent uses it."""

    def __init__(self) -> None:
        self.text = {"type": "text", "text": "original"}
        self.picture = image()
        self.blocks: list[Any] = [self.picture, self.text]
        self.messages: list[Any] = [{"role": "user", "content": self.blocks}]

    def mutate(self) -> None:
        self.text["text"] = "changed"
        self.picture["source"]["data"] = OTHER_PNG
        self.blocks.append({"type": "text", "text": "appended"})
        self.messages.append({"role": "assistant", "content": []})


EXPECTED_USER = Message.user(image(), "original")


def noop() -> str:
    """Do nothing."""
    return "ok"


def mutating_agent(data: CallerData) -> tuple[Agent, ScriptedModel]:
    """A first turn that changes the caller's data, then a second model call."""

    def first_turn(request: Any) -> Message:
        data.mutate()
        return Message.assistant({"type": "tool_use", "id": "c1", "name": "noop", "input": {}})

    model = ScriptedModel([first_turn, "done"])
    return Agent(AgentConfig("a", model=model, tools=[noop])), model


async def test_run_does_not_see_caller_changes_made_during_the_run() -> None:
    data = CallerData()
    agent, model = mutating_agent(data)
    result = await agent.run(data.messages)
    data.mutate()
    assert result.output == "done"
    assert [r.messages[0] for r in model.requests] == [EXPECTED_USER, EXPECTED_USER]
    assert len(model.requests[1].messages) == 3


async def test_stream_does_not_see_caller_changes_made_after_the_call() -> None:
    data = CallerData()
    agent, model = mutating_agent(data)
    events = agent.stream(data.messages)
    data.mutate()
    assert [e.type async for e in events][-1] == "done"
    assert [r.messages[0] for r in model.requests] == [EXPECTED_USER, EXPECTED_USER]


async def test_prompt_keeps_the_original_blocks_whatever_the_caller_does() -> None:
    data = CallerData()
    agent, model = mutating_agent(data)
    await agent.prompt(data.blocks)
    data.mutate()
    sent = [r.messages[0].content for r in model.requests]
    assert sent == [EXPECTED_USER.content, EXPECTED_USER.content]
    assert agent.get_history()[0].content == EXPECTED_USER.content


async def test_get_history_and_result_messages_are_copies() -> None:
    model = ScriptedModel(["first", "second"])
    agent = Agent(AgentConfig("a", model=model))
    result = await agent.prompt("hi")
    history = agent.get_history()
    history.clear()
    assert [m.text for m in agent.get_history()] == ["hi", "first"]
    assert agent.get_history() is not agent.get_history()
    assert isinstance(result.messages, tuple)
    copied = list(result.messages)
    copied.append(Message.user("injected"))
    assert [m.text for m in agent.get_history()] == ["hi", "first"]


async def test_history_from_config_is_copied_and_used() -> None:
    history: list[Any] = [
        {"role": "user", "content": [{"type": "text", "text": "My name is Ada."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello Ada."}]},
    ]
    model = ScriptedModel(["You are Ada."])
    agent = Agent(AgentConfig("a", model=model, history=history))
    history[0]["content"][0]["text"] = "changed"
    history.append({"role": "user", "content": []})
    await agent.prompt("Who am I?")
    assert [m.text for m in model.requests[0].messages] == [
        "My name is Ada.",
        "Hello Ada.",
        "Who am I?",
    ]
    assert [m.text for m in agent.get_history()] == [
        "My name is Ada.",
        "Hello Ada.",
        "Who am I?",
        "You are Ada.",
    ]


async def test_before_run_changes_to_ctx_messages_do_not_reach_the_caller() -> None:
    messages = [Message.user("keep me")]

    def hook(ctx: RunContext) -> RunContext:
        ctx.messages.append(Message.assistant("hook"))
        ctx.messages.append(Message.user("and more"))
        return ctx

    model = ScriptedModel(["ok"])
    agent = Agent(AgentConfig("a", model=model, before_run=hook))
    await agent.run(messages)
    assert messages == [Message.user("keep me")]
    assert [m.text for m in model.requests[0].messages] == ["keep me", "hook", "and more"]
