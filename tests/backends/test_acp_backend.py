"""AcpBackend against a real ACP agent (peers/acp_agent.py) over stdio."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any

import pytest

from backends.support import ACP, Reports, bounded, has_exited, wait_exited
from turnkit import Agent, AgentConfig, StreamEvent, TextBlock, ThinkingBlock
from turnkit.backends import AcpBackend, PermissionRequest


def acp_agent(*flags: str, **options: Any) -> Agent:
    return Agent(AgentConfig("acp", backend=AcpBackend([*ACP, *flags], **options)))


async def collect(agent: Agent, prompt: str) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    async with asyncio.timeout(15):
        async for event in agent.stream(prompt):
            events.append(event)
    return events


async def test_run_returns_the_agent_reply_with_its_thinking() -> None:
    result = await bounded(acp_agent().run("hello"))
    assert result.success, result.error
    assert result.output == "turn 1: you said hello"
    assert result.stop_reason == "end_turn"
    (message,) = result.messages
    assert message.content == (
        ThinkingBlock("thinking about 'hello'"),
        TextBlock("turn 1: you said hello"),
    )
    assert message.origin is not None and message.origin.to_dict() == {
        "provider": "acp",
        "model": "peer-acp",
    }


async def test_stream_yields_thought_and_message_chunks_as_deltas() -> None:
    events = await collect(acp_agent(), "hi")
    assert [(e.type, e.text) for e in events[:-2]] == [
        ("thinking_delta", "thinking about 'hi'"),
        ("text_delta", "turn 1: "),
        ("text_delta", "you said "),
        ("text_delta", "hi"),
    ]
    assert [e.type for e in events[-2:]] == ["message", "done"]
    assert events[-1].result is not None and events[-1].result.output == "turn 1: you said hi"


async def test_prompt_continues_one_session_in_one_process(reports: Reports) -> None:
    async with acp_agent("--report", reports.path) as agent:
        first = await bounded(agent.prompt("one"))
        second = await bounded(agent.prompt("two"))
        turns = [await reports.next("prompt"), await reports.next("prompt")]
        assert (first.output, second.output) == ("turn 1: you said one", "turn 2: you said two")
        assert turns[0]["pid"] == turns[1]["pid"]
        fresh = await bounded(agent.run("apart"))  # run() is fresh: its own process
        assert fresh.output == "turn 1: you said apart"
        assert (await reports.next("prompt"))["pid"] != turns[0]["pid"]
        assert [m.text for m in agent.get_history()] == [
            "one",
            "turn 1: you said one",
            "two",
            "turn 2: you said two",
        ]
        assert not has_exited(turns[0]["pid"])
    assert has_exited(turns[0]["pid"])  # aclose() ended the session's process


def test_prompt_sync_keeps_the_session_across_event_loops() -> None:
    with acp_agent() as agent:
        assert agent.prompt_sync("one").output == "turn 1: you said one"
        assert agent.prompt_sync("two").output == "turn 2: you said two"


async def test_a_new_session_starts_after_aclose() -> None:
    agent = acp_agent()
    assert (await bounded(agent.prompt("one"))).output == "turn 1: you said one"
    await bounded(agent.aclose())
    assert (await bounded(agent.prompt("again"))).output == "turn 1: you said again"
    await bounded(agent.aclose())


async def test_a_forgotten_session_process_is_killed_with_its_agent(reports: Reports) -> None:
    agent = acp_agent("--report", reports.path)
    await bounded(agent.prompt("one"))
    pid = (await reports.next("prompt"))["pid"]
    assert not has_exited(pid)
    del agent
    gc.collect()
    await wait_exited(pid)


async def test_session_cwd_is_the_backend_cwd(tmp_path: Path, reports: Reports) -> None:
    agent = acp_agent("--report", reports.path, cwd=tmp_path)
    await bounded(agent.run("hi"))
    assert (await reports.next("session"))["cwd"] == str(tmp_path)


async def test_tool_calls_stream_as_tool_use_and_tool_result() -> None:
    events = await collect(acp_agent(permission_policy="allow"), "use the tool")
    uses = [e.block for e in events if e.type == "tool_use"]
    results = [e.block for e in events if e.type == "tool_result"]
    assert [(b.id, b.name, dict(b.input)) for b in uses] == [
        ("call-1", "Read notes", {"path": "notes.txt"})
    ]
    assert [(b.tool_use_id, b.content, b.is_error) for b in results] == [
        ("call-1", "notes: buy milk", False)
    ]
    assert events[-1].result.output.endswith("[permission: allowed]")


async def test_permission_is_denied_by_default() -> None:
    events = await collect(acp_agent(), "use the tool")
    (denied,) = [e.block for e in events if e.type == "tool_result"]
    assert (denied.content, denied.is_error) == ("permission denied", True)
    assert events[-1].result.output.endswith("[permission: denied]")


async def test_a_permission_policy_function_decides() -> None:
    asked: list[PermissionRequest] = []

    async def policy(request: PermissionRequest) -> str:
        asked.append(request)
        return "yes"

    result = await bounded(acp_agent(permission_policy=policy).run("use the tool"))
    assert result.output.endswith("[permission: allowed]")
    (request,) = asked
    assert (request.tool_call_id, request.title, request.kind) == ("call-1", "Read notes", "read")
    assert request.input == {"path": "notes.txt"}
    assert [(o.option_id, o.kind) for o in request.options] == [
        ("yes", "allow_once"),
        ("no", "reject_once"),
    ]
    denied = await bounded(acp_agent(permission_policy=lambda r: False).run("use the tool"))
    assert denied.output.endswith("[permission: denied]")


async def test_a_failing_permission_policy_denies_and_fails_the_run() -> None:
    def policy(request: PermissionRequest) -> bool:
        raise RuntimeError("policy bug")

    result = await bounded(acp_agent(permission_policy=policy).run("use the tool"))
    assert not result.success
    assert result.error == "permission_policy raised RuntimeError: policy bug"


def test_an_unknown_permission_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="permission_policy must be"):
        AcpBackend(ACP, permission_policy="ask")


@pytest.mark.parametrize(
    ("prompt", "success", "stop_reason"),
    [
        ("please refuse", True, "refusal"),
        ("hit the limit", True, "max_tokens"),
        ("loop forever", False, "max_turns"),
    ],
)
async def test_stop_reasons_map_to_the_run_result(
    prompt: str, success: bool, stop_reason: str
) -> None:
    result = await bounded(acp_agent().run(prompt))
    assert (result.success, result.stop_reason) == (success, stop_reason)
    if not success:
        assert "limit of model requests" in result.error


async def test_cancelling_a_stream_sends_session_cancel_and_ends_the_process(
    tmp_path: Path, reports: Reports
) -> None:
    marker = tmp_path / "cancelled"
    agent = acp_agent("--report", reports.path, "--cancel-marker", str(marker))

    async def consume() -> None:
        async for _ in agent.stream("hang on"):
            pass

    task = asyncio.create_task(consume())
    hanging = await reports.next("hang")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await bounded(task)
    assert marker.exists()  # the agent got session/cancel before it was closed
    assert has_exited(hanging["pid"])


async def test_a_cancelled_prompt_leaves_the_session_usable(
    tmp_path: Path, reports: Reports
) -> None:
    marker = tmp_path / "cancelled"
    async with acp_agent("--report", reports.path, "--cancel-marker", str(marker)) as agent:
        task = asyncio.create_task(agent.prompt("hang on"))
        hanging = await reports.next("hang")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await bounded(task)
        assert marker.exists()
        result = await bounded(agent.prompt("still there?"))
        assert result.output == "turn 2: you said still there?"
        assert (await reports.next("prompt"))["pid"] == hanging["pid"]


async def test_an_agent_that_ignores_cancel_is_killed(reports: Reports) -> None:
    agent = acp_agent("--report", reports.path, "--ignore-cancel")
    task = asyncio.create_task(agent.run("hang on"))
    hanging = await reports.next("hang")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await bounded(task)
    await reports.next("cancel")
    assert has_exited(hanging["pid"])


async def test_timeout_cancels_the_turn_and_fails_the_run(reports: Reports) -> None:
    # 3 s: starting the peer (Python, pydantic) takes part of it.
    agent = acp_agent("--report", reports.path, timeout_s=3)
    result = await bounded(agent.run("hang on"))
    hanging = await reports.next("hang")
    await reports.next("cancel")
    assert not result.success
    assert result.stop_reason == "timeout"
    assert result.error.endswith("timed out after 3s")
    assert has_exited(hanging["pid"])


async def test_an_agent_crash_mid_prompt_fails_the_run_with_its_stderr() -> None:
    result = await bounded(acp_agent().run("crash now"))
    assert not result.success
    assert "failed during the prompt: its process exited with code 3" in result.error
    assert result.error.endswith("peer crashed on purpose")


async def test_an_agent_crash_at_start_fails_the_run_with_its_stderr() -> None:
    result = await bounded(acp_agent("--crash-on-start").run("hi"))
    assert not result.success
    assert "failed to start: its process exited with code 2" in result.error
    assert result.error.endswith("peer could not start: bad configuration")


async def test_a_crashed_session_is_replaced_at_the_next_prompt(reports: Reports) -> None:
    async with acp_agent("--report", reports.path) as agent:
        assert (await bounded(agent.prompt("one"))).success
        first = await reports.next("prompt")
        crashed = await bounded(agent.prompt("crash now"))
        assert not crashed.success and "exited with code 3" in crashed.error
        again = await bounded(agent.prompt("back?"))
        assert again.output == "turn 1: you said back?"
        assert (await reports.next("session"))["pid"] != first["pid"]
    assert [m.text for m in agent.get_history()] == [
        "one",
        "turn 1: you said one",
        "back?",
        "turn 1: you said back?",
    ]


async def test_a_command_that_cannot_start_fails_the_run() -> None:
    agent = Agent(AgentConfig("none", backend=AcpBackend("/nonexistent/acp-agent")))
    result = await bounded(agent.run("hi"))
    assert not result.success
    assert "could not start the ACP agent `/nonexistent/acp-agent`" in result.error
