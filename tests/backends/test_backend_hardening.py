"""Backends given hostile prompts or runaway agents: a failed result or a clear error, no hang."""

from __future__ import annotations

import json
import sys

import pytest

from backends.support import ECHO, bounded
from turnkit import Agent, AgentConfig, InvalidMessageError
from turnkit.backends import AcpBackend, ProcessBackend
from turnkit.backends.process import DEFAULT_MAX_OUTPUT_BYTES

SURROGATE = json.loads('"\\ud800"')


async def _done(backend: ProcessBackend, prompt: str):  # type: ignore[no-untyped-def]
    events = [event async for event in backend.turn(prompt)]
    assert [event.type for event in events][-1] == "done"
    return events[-1].result


async def test_a_nul_in_an_argument_prompt_fails_the_run_before_anything_starts() -> None:
    backend = ProcessBackend([*ECHO, "--from-arg"], prompt_via="argument")
    result = await bounded(_done(backend, "a\0b"))
    assert not result.success and result.stop_reason == "error"
    assert "NUL character" in result.error


async def test_a_nul_in_a_stdin_prompt_is_just_a_byte() -> None:
    result = await bounded(Agent(AgentConfig("e", backend=ProcessBackend(ECHO))).run("a\0b"))
    assert result.success, result.error
    assert result.output == "echo: a\0b"


@pytest.mark.parametrize("prompt_via", ["stdin", "argument"])
async def test_an_unencodable_prompt_fails_the_turn_cleanly(prompt_via: str) -> None:
    flags = ["--from-arg"] if prompt_via == "argument" else []
    backend = ProcessBackend([*ECHO, *flags], prompt_via=prompt_via)  # type: ignore[arg-type]
    result = await bounded(_done(backend, "x" + SURROGATE))
    assert not result.success and "lone surrogate" in result.error


async def test_an_unencodable_prompt_to_an_agent_is_invalid_input_up_front() -> None:
    agent = Agent(AgentConfig("e", backend=ProcessBackend(ECHO)))
    with pytest.raises(InvalidMessageError) as caught:
        await agent.run("x" + SURROGATE)
    assert caught.value.path == "input" and "surrogate" in caught.value.problem


async def test_a_nul_in_the_command_fails_the_run_instead_of_raising() -> None:
    result = await bounded(_done(ProcessBackend([sys.executable, "-c", "pass\0"]), "hi"))
    assert not result.success and result.error.startswith("could not start")


async def test_stdin_is_closed_after_the_prompt_so_a_reader_to_eof_finishes() -> None:
    script = "import sys; data = sys.stdin.buffer.read(); print(len(data))"
    result = await bounded(_done(ProcessBackend([sys.executable, "-c", script]), "four"))
    assert result.success and result.output.strip() == "4"


async def test_runaway_output_is_capped_and_the_process_killed() -> None:
    script = "import sys\nwhile True: sys.stdout.write('y' * 65536)"
    backend = ProcessBackend([sys.executable, "-c", script], max_output_bytes=100_000)
    result = await bounded(_done(backend, ""))
    assert not result.success and result.stop_reason == "error"
    assert "more than 100000 bytes to stdout (max_output_bytes)" in result.error


def test_the_output_cap_has_a_documented_default_and_is_checked() -> None:
    assert DEFAULT_MAX_OUTPUT_BYTES == 16 * 1024 * 1024
    assert ProcessBackend(ECHO).max_output_bytes == DEFAULT_MAX_OUTPUT_BYTES
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="max_output_bytes"):
            ProcessBackend(ECHO, max_output_bytes=bad)  # type: ignore[arg-type]


SILENT = [sys.executable, "-c", "import sys; sys.stdin.buffer.read()"]  # never answers


async def test_an_acp_agent_that_never_finishes_starting_times_out() -> None:
    agent = Agent(AgentConfig("acp", backend=AcpBackend(SILENT, timeout_s=0.5)))
    result = await bounded(agent.run("hi"))
    assert not result.success
    assert result.stop_reason == "timeout"
    assert "failed to start: timed out after 0.5s" in result.error


async def test_a_prompt_to_an_acp_agent_that_never_starts_times_out_too() -> None:
    async with Agent(AgentConfig("acp", backend=AcpBackend(SILENT, timeout_s=0.5))) as agent:
        result = await bounded(agent.prompt("hi"))
    assert result.stop_reason == "timeout" and not result.success
