"""ProcessBackend: one process per turn, stdout as the reply, never an orphan."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from backends.support import ECHO, Reports, bounded, has_exited, wait_exited
from turnkit import Agent, AgentConfig, StreamEvent
from turnkit.backends import ProcessBackend


def echo_agent(*flags: str, **options: Any) -> Agent:
    return Agent(AgentConfig("echo", backend=ProcessBackend([*ECHO, *flags], **options)))


async def test_run_returns_stdout_as_the_output_and_one_assistant_message() -> None:
    result = await bounded(echo_agent().run("hello there"))
    assert result.success, result.error
    assert result.output == "echo: hello there"
    assert result.stop_reason == "end_turn"
    (message,) = result.messages
    assert message.role == "assistant"
    assert message.text == "echo: hello there"
    assert message.origin is not None and message.origin.provider == "process"
    assert message.metadata == {"exit_code": 0}
    assert message.invocation_id


async def test_prompt_as_the_last_argument() -> None:
    result = await bounded(echo_agent("--from-arg", prompt_via="argument").run("by argument"))
    assert result.output == "echo: by argument"


def test_command_as_a_string_is_split_like_a_shell_would() -> None:
    backend = ProcessBackend("tr 'a-z' 'A-Z'")
    assert backend.command == ("tr", "a-z", "A-Z")
    assert Agent(AgentConfig("upper", backend=backend)).run_sync("shout").output == "SHOUT"


async def test_stream_yields_stdout_as_text_deltas_then_the_message_and_done() -> None:
    events: list[StreamEvent] = []
    async with asyncio.timeout(15):
        async for event in echo_agent().stream("streamed reply"):
            events.append(event)
    kinds = [event.type for event in events]
    assert kinds[-2:] == ["message", "done"]
    assert set(kinds[:-2]) == {"text_delta"}
    done = events[-1].result
    assert done is not None and done.success
    assert "".join(event.text for event in events[:-2]) == done.output == "echo: streamed reply"


async def test_stream_delivers_output_while_the_process_still_runs(reports: Reports) -> None:
    agent = echo_agent("--hang", "--report", reports.path)
    stream = agent.stream("never finished")
    first = await bounded(anext(stream))
    assert first == StreamEvent("text_delta", text="echo: ")
    hanging = await reports.next("hang")
    assert not has_exited(hanging["pid"])
    await stream.aclose()
    assert has_exited(hanging["pid"])


async def test_prompt_runs_a_fresh_process_each_turn_and_keeps_the_history() -> None:
    agent = echo_agent()
    first = await bounded(agent.prompt("one"))
    second = await bounded(agent.prompt("two"))
    assert (first.output, second.output) == ("echo: one", "echo: two")
    assert [m.text for m in agent.get_history()] == ["one", "echo: one", "two", "echo: two"]


async def test_non_zero_exit_fails_the_run_with_the_code_and_the_end_of_stderr() -> None:
    noise = "x" * 5000
    agent = echo_agent("--exit", "3", "--stderr", f"{noise}\nTraceback: the real reason")
    result = await bounded(agent.run("hi"))
    assert not result.success
    assert (result.output, result.messages, result.stop_reason) == ("", (), "error")
    assert "exited with code 3" in result.error
    assert result.error.endswith("Traceback: the real reason")
    assert len(result.error) < 2500  # the tail of stderr, not all of it


async def test_a_process_killed_by_a_signal_fails_the_run_saying_so() -> None:
    result = await bounded(echo_agent("--kill-self").run("hi"))
    assert not result.success
    assert "was killed by signal SIGKILL" in result.error
    assert "stderr was empty" in result.error


async def test_stderr_of_a_successful_run_is_kept_in_the_message_metadata() -> None:
    result = await bounded(echo_agent("--stderr", "a warning").run("hi"))
    assert result.success
    assert result.messages[0].metadata == {"exit_code": 0, "stderr": "a warning"}


async def test_a_command_that_cannot_start_fails_the_run() -> None:
    agent = Agent(AgentConfig("none", backend=ProcessBackend(["/nonexistent/agent-binary"])))
    result = await bounded(agent.run("hi"))
    assert not result.success
    assert "could not start the process `/nonexistent/agent-binary`" in result.error


async def test_cwd_and_env_are_given_to_the_process(tmp_path: Path) -> None:
    backend = ProcessBackend(
        [*ECHO, "--print-cwd", "--print-env", "TK_SETTING"],
        cwd=tmp_path,
        env={"TK_SETTING": "on"},
    )
    result = await bounded(Agent(AgentConfig("env", backend=backend)).run("hi"))
    assert result.output == f"echo: hi cwd={tmp_path} TK_SETTING=on"


async def test_a_large_prompt_and_reply_do_not_deadlock_on_the_pipes() -> None:
    prompt = "0123456789" * 200_000
    result = await bounded(echo_agent().run(prompt))
    assert result.output == "echo: " + prompt


async def test_timeout_kills_the_process_group_and_fails_the_run(reports: Reports) -> None:
    agent = echo_agent("--hang", "--spawn-child", "--report", reports.path, timeout_s=0.5)
    result = await bounded(agent.run("slow"))
    hanging = await reports.next("hang")
    assert not result.success
    assert result.stop_reason == "timeout"
    assert "timed out after 0.5s; its process group was killed" in result.error
    assert has_exited(hanging["pid"])
    await wait_exited(hanging["child"])


@pytest.mark.parametrize("entry", ["run", "stream"])
async def test_cancelling_the_run_kills_the_whole_process_group(
    reports: Reports, entry: str
) -> None:
    agent = echo_agent("--hang", "--spawn-child", "--report", reports.path)

    async def consume() -> None:
        if entry == "run":
            await agent.run("forever")
        else:
            async for _ in agent.stream("forever"):
                pass

    task = asyncio.create_task(consume())
    hanging = await reports.next("hang")
    assert not has_exited(hanging["pid"]) and not has_exited(hanging["child"])
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await bounded(task)
    assert has_exited(hanging["pid"])  # reaped before the cancellation returned
    await wait_exited(hanging["child"])  # the grandchild got the group's SIGKILL


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"command": []}, "command is empty"),
        ({"command": "echo", "prompt_via": "pipe"}, "prompt_via must be"),
        ({"command": "echo", "timeout_s": 0}, "timeout_s must be a positive number"),
    ],
)
def test_bad_settings_are_refused_when_the_backend_is_built(
    kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ProcessBackend(**kwargs)


async def test_a_child_left_holding_stdout_does_not_keep_the_turn_open(reports: Reports) -> None:
    # The grandchild inherits stdout and would keep the pipe open forever.
    result = await bounded(echo_agent("--spawn-child", "--report", reports.path).run("hi"))
    started = await reports.next("started")
    assert result.output == "echo: hi"
    await wait_exited(started["child"])
