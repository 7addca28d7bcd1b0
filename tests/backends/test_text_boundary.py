"""SPEC section 6: backends take text only, and say so before any process starts."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from backends.support import ACP, ECHO, bounded
from turnkit import (
    Agent,
    AgentConfig,
    InvalidMessageError,
    Message,
    RunContext,
    RunResult,
    TextBlock,
    tool,
)
from turnkit.backends import AcpBackend, ProcessBackend

MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
ONE_TEXT_BLOCK = [{"type": "text", "text": "hi"}]


def make_backend(kind: str, marker: Path) -> ProcessBackend | AcpBackend:
    """A backend whose process creates ``marker`` as soon as it starts."""
    if kind == "process":
        return ProcessBackend([*ECHO, "--touch", str(marker)])
    return AcpBackend([*ACP, "--touch", str(marker)])


def reply_to(kind: str, prompt: str) -> str:
    return f"echo: {prompt}" if kind == "process" else f"turn 1: you said {prompt}"


@pytest.fixture(params=["process", "acp"])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "started"


def agent_for(kind: str, marker: Path, **config: Any) -> Agent:
    return Agent(AgentConfig("external", backend=make_backend(kind, marker), **config))


async def drain_stream(agent: Agent, value: Any) -> None:
    async for _ in agent.stream(value):
        pass


ENTRY_POINTS: dict[str, Callable[[Agent], Any]] = {
    "run(messages)": lambda agent: agent.run(MESSAGES),
    "run(message objects)": lambda agent: agent.run([Message.user("hi")]),
    "stream(messages)": lambda agent: drain_stream(agent, MESSAGES),
    "prompt(one text block)": lambda agent: agent.prompt(ONE_TEXT_BLOCK),
    "prompt(block objects)": lambda agent: agent.prompt([TextBlock("hi")]),
    "run_sync(messages)": lambda agent: agent.run_sync(MESSAGES),
    "prompt_sync(blocks)": lambda agent: agent.prompt_sync(ONE_TEXT_BLOCK),
    "validate_run_input(messages)": lambda agent: agent.validate_run_input(MESSAGES),
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
async def test_structured_input_raises_before_any_process_starts(
    kind: str, marker: Path, entry: str
) -> None:
    hooks: list[str] = []
    agent = agent_for(
        kind,
        marker,
        before_run=lambda ctx: hooks.append("before"),
        after_run=lambda ctx, result: hooks.append("after"),
    )
    with pytest.raises(InvalidMessageError, match="takes text only") as caught:
        outcome = ENTRY_POINTS[entry](agent)
        if asyncio.iscoroutine(outcome):
            await outcome
    assert caught.value.path == "input"
    assert caught.value.code == "INVALID_MESSAGE"
    assert not marker.exists(), "a process started"
    assert hooks == []
    assert agent.get_history() == []
    # The control: the same agent with text does start its process.
    result = await bounded(agent.run("hi"))
    assert result.output == reply_to(kind, "hi")
    assert marker.exists()
    await agent.aclose()


def test_stream_raises_when_called_not_when_iterated(kind: str, marker: Path) -> None:
    with pytest.raises(InvalidMessageError):
        agent_for(kind, marker).stream(MESSAGES)
    assert not marker.exists()


async def test_non_string_input_is_refused_too(kind: str, marker: Path) -> None:
    agent = agent_for(kind, marker)
    with pytest.raises(InvalidMessageError, match="input: expected a string, got a number"):
        await agent.run(42)
    assert not marker.exists()


async def test_before_run_can_rewrite_the_prompt_that_is_sent(kind: str, marker: Path) -> None:
    seen: list[str] = []

    def rewrite(ctx: RunContext) -> dict[str, str]:
        seen.append(ctx.prompt)
        return {"prompt": ctx.prompt.upper()}

    async with agent_for(kind, marker, before_run=rewrite) as agent:
        result = await bounded(agent.prompt("quiet please"))
        assert result.output == reply_to(kind, "QUIET PLEASE")
        assert seen == ["quiet please"]
        assert agent.get_history()[0].text == "quiet please"  # the raw turn is kept


async def test_before_run_returning_the_same_messages_is_fine(kind: str, marker: Path) -> None:
    def same(ctx: RunContext) -> dict[str, Any]:
        return {"messages": [m.to_dict() for m in ctx.messages], "prompt": ctx.prompt}

    result = await bounded(agent_for(kind, marker, before_run=same).run("as is"))
    assert result.output == reply_to(kind, "as is")


async def test_before_run_changing_the_messages_fails_the_run_without_a_process(
    kind: str, marker: Path
) -> None:
    after: list[RunResult] = []

    def replace_messages(ctx: RunContext) -> dict[str, Any]:
        return {"messages": [Message.system("be brief"), *ctx.messages]}

    agent = agent_for(
        kind,
        marker,
        before_run=replace_messages,
        after_run=lambda ctx, result: after.append(result),
    )
    result = await bounded(agent.prompt("hi"))
    assert not result.success
    assert "cannot be forwarded without loss" in result.error
    assert not marker.exists()
    assert after == [result]  # after_run still sees the (failed) run
    assert agent.get_history() == []


async def test_before_run_mutating_ctx_messages_counts_as_a_change(kind: str, marker: Path) -> None:
    def mutate(ctx: RunContext) -> RunContext:
        ctx.messages.insert(0, Message.user("extra context"))
        return ctx

    result = await bounded(agent_for(kind, marker, before_run=mutate).run("hi"))
    assert "cannot be forwarded without loss" in result.error
    assert not marker.exists()


async def test_history_is_not_sent_to_the_external_agent(kind: str, marker: Path) -> None:
    history = [Message.user("SECRET earlier question"), Message.assistant("SECRET answer")]
    async with agent_for(kind, marker, history=history) as agent:
        result = await bounded(agent.prompt("now"))
        assert result.output == reply_to(kind, "now")
        assert "SECRET" not in result.output
        assert [m.text for m in agent.get_history()] == [
            "SECRET earlier question",
            "SECRET answer",
            "now",
            reply_to(kind, "now"),
        ]


async def test_after_run_still_applies(kind: str, marker: Path) -> None:
    def shorten(ctx: RunContext, result: RunResult) -> RunResult:
        assert ctx.prompt == "hi"
        return RunResult(True, output="short", messages=(Message.assistant("short"),))

    result = await bounded(agent_for(kind, marker, after_run=shorten).run("hi"))
    assert result.output == "short"


async def test_continue_run_is_not_supported(kind: str, marker: Path) -> None:
    agent = agent_for(kind, marker, history=[Message.user("hi")])
    with pytest.raises(NotImplementedError, match="cannot be forwarded"):
        await agent.continue_run()
    assert not marker.exists()


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    return term


@pytest.mark.parametrize(
    "setting",
    [
        {"tools": [lookup]},
        {"system": "Be brief."},
        {"temperature": 0.2},
        {"transform_context": lambda messages: messages},
    ],
)
def test_model_settings_cannot_be_combined_with_a_backend(
    kind: str, marker: Path, setting: dict[str, Any]
) -> None:
    (field,) = setting
    with pytest.raises(ValueError, match=rf"AgentConfig\.{field} cannot be used with a backend"):
        agent_for(kind, marker, **setting)


def test_a_backend_must_be_a_turnkit_backend() -> None:
    with pytest.raises(TypeError, match=r"must be a turnkit\.backends transport"):
        Agent(AgentConfig("bad", backend="claude"))
