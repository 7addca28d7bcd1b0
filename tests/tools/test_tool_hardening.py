"""Tools that misbehave: unreadable errors, calls that never return, non-JSON results."""

from __future__ import annotations

import asyncio
import json
import math
import os
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest

from turnkit import Tool, ToolUseBlock, tool
from turnkit.tools import execute_tool_call
from turnkit.tools.tool import DEFAULT_TOOL_TIMEOUT_S


async def run(made: Tool, /, **arguments: Any) -> Any:
    return await execute_tool_call(ToolUseBlock("c1", made.name, arguments), {made.name: made})


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


async def test_an_exception_whose_str_raises_is_still_an_error_result() -> None:
    @tool
    def broken() -> str:
        """Fails oddly."""
        raise Unprintable

    result = await run(broken)
    assert result.is_error
    assert "Unprintable" in result.content and "could not be read" in result.content


async def test_a_validator_that_raises_anything_is_an_error_result() -> None:
    def validator(data: dict[str, Any]) -> dict[str, Any]:
        raise Unprintable

    made = Tool("v", "", {"type": "object"}, lambda: "x", validator=validator)
    result = await run(made)
    assert (
        result.is_error and "Checking the input of tool 'v' failed: Unprintable" in result.content
    )


async def test_a_sync_tool_that_never_returns_becomes_an_error_result_at_its_timeout() -> None:
    release = threading.Event()
    started = threading.Event()

    @tool(timeout_s=0.2)
    def stuck() -> str:
        """Never returns (until the test lets it go)."""
        started.set()
        release.wait()
        return "late"

    try:
        result = await run(stuck)
    finally:
        release.set()
    assert started.is_set()
    assert result.is_error
    assert result.content == "Tool 'stuck' did not finish within 0.2s; it was abandoned."


async def test_what_a_sync_tool_returns_is_awaited_within_the_same_deadline() -> None:
    async def slow(value: str) -> str:
        await asyncio.sleep(30)
        return value

    made = Tool("later", "", {"type": "object"}, lambda: slow("late"), timeout_s=0.2)
    result = await run(made)
    assert result.is_error
    assert result.content == "Tool 'later' did not finish within 0.2s; it was abandoned."
    soon = Tool("soon", "", {"type": "object"}, lambda: asyncio.sleep(0, "in time"))
    assert (await run(soon)).content == "in time"
    assert not made.is_async and not soon.is_async


async def test_a_tool_argument_named_like_the_deadline_reaches_the_function() -> None:
    @tool(timeout_s=5)
    def wait(timeout_s: float) -> str:
        """Echoes its own argument."""
        return f"asked for {timeout_s:g}s"

    assert (await run(wait, timeout_s=0.5)).content == "asked for 0.5s"


async def test_an_async_tool_past_its_timeout_is_cancelled() -> None:
    cancelled = asyncio.Event()

    @tool(timeout_s=0.1)
    async def hangs() -> str:
        """Awaits forever."""
        try:
            await asyncio.Event().wait()
        finally:
            cancelled.set()
        return "never"

    result = await run(hangs)
    assert result.is_error and "did not finish within 0.1s" in result.content
    assert cancelled.is_set()


async def test_a_timeout_error_raised_by_the_tool_itself_is_reported_as_its_failure() -> None:
    @tool(timeout_s=30)
    def times_out() -> str:
        """Raises TimeoutError on its own."""
        raise TimeoutError("upstream took too long")

    result = await run(times_out)
    assert result.content == "Tool 'times_out' failed: TimeoutError: upstream took too long"


def test_the_timeout_has_a_documented_default_and_a_per_tool_override() -> None:
    @tool
    def plain() -> str:
        """Plain."""
        return ""

    assert DEFAULT_TOOL_TIMEOUT_S == 120.0
    assert plain.timeout_s == DEFAULT_TOOL_TIMEOUT_S
    assert Tool("t", "", {"type": "object"}, lambda: "", timeout_s=None).timeout_s is None
    for bad in (0, -1, True, "5", math.nan):
        with pytest.raises(ValueError, match="timeout_s must be a positive number"):
            Tool("t", "", {"type": "object"}, lambda: "", timeout_s=bad)  # type: ignore[arg-type]


def test_run_sync_returns_and_the_program_exits_while_a_tool_thread_is_stuck() -> None:
    script = textwrap.dedent(
        """
        import threading
        from turnkit import Agent, AgentConfig, Message, ToolUseBlock, tool
        from turnkit.testing import ScriptedModel

        @tool(timeout_s=0.3)
        def stuck() -> str:
            '''Blocks forever.'''
            threading.Event().wait()

        model = ScriptedModel([Message.assistant(ToolUseBlock("c1", "stuck", {})), "gave up"])
        agent = Agent(AgentConfig("a", model=model, tools=[stuck]))
        result = agent.run_sync("go")
        print(result.output)
        print(result.messages[1].content[0].content)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "gave up",
        "Tool 'stuck' did not finish within 0.3s; it was abandoned.",
    ]


@pytest.mark.parametrize(
    "value",
    [{"x": math.nan}, [math.inf, -math.inf], {"nested": {"v": [1.5, math.nan]}}],
)
async def test_results_with_nan_or_infinity_are_sent_as_valid_json(value: Any) -> None:
    @tool
    def numbers() -> Any:
        """Returns odd floats."""
        return value

    result = await run(numbers)
    assert not result.is_error

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    decoded = json.loads(result.content, parse_constant=refuse)
    assert "NaN" in result.content or "Infinity" in result.content
    assert decoded is not None


# -- where sync tools run ----------------------------------------------------------


async def test_sync_tools_run_off_the_loop_reusing_one_worker_thread_with_the_context() -> None:
    import contextvars

    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id")
    seen: list[tuple[int, str]] = []

    @tool
    def where() -> str:
        """Says which thread and request it ran in."""
        seen.append((threading.get_ident(), request_id.get("none")))
        return "ok"

    request_id.set("r-1")
    assert (await run(where)).content == "ok"  # may start a worker (or reuse an idle one)
    # Workers are shared by the process: earlier tests may have left more than one idle.
    workers = {t.ident for t in threading.enumerate() if t.name == "turnkit-worker"}
    for _ in range(19):
        assert (await run(where)).content == "ok"
    threads = {ident for ident, _ in seen}
    assert threading.get_ident() not in threads  # never on the event loop's thread
    assert threads <= workers  # one hand-over per call: no thread started per call
    assert {value for _, value in seen} == {"r-1"}


async def test_sync_tools_called_together_run_in_parallel_threads() -> None:
    together = threading.Barrier(4, timeout=10)  # raises, not hangs, if they were serialised

    @tool
    def meet() -> str:
        """Waits for the other three."""
        together.wait()
        return "met"

    results = await asyncio.gather(*(run(meet) for _ in range(4)))
    assert [r.content for r in results] == ["met"] * 4


async def test_a_stuck_sync_tool_keeps_its_thread_and_later_calls_get_another() -> None:
    release = threading.Event()

    @tool(timeout_s=0.1)
    def stuck() -> str:
        """Never returns (until the test lets it go)."""
        release.wait()
        return "late"

    @tool
    def quick() -> str:
        """Returns at once."""
        return "quick"

    try:
        assert (await run(stuck)).is_error
        assert [(await run(quick)).content for _ in range(3)] == ["quick"] * 3
    finally:
        release.set()


async def test_the_loop_runs_other_tasks_while_a_slow_sync_tool_runs() -> None:
    other_task_ran = threading.Event()

    @tool
    def wait_for_the_loop() -> str:
        """Returns once a task on the event loop has run (or after 10 s)."""
        return "loop ran" if other_task_ran.wait(10) else "loop was held up"

    async def other_task() -> None:
        other_task_ran.set()

    result, _ = await asyncio.gather(run(wait_for_the_loop), other_task())
    assert result.content == "loop ran"


async def test_a_sync_tool_that_fails_after_a_while_is_an_error_result() -> None:
    @tool
    def slow_failure() -> str:
        """Fails once the loop has stopped waiting for it directly."""
        threading.Event().wait(0.05)
        raise ValueError("gave up")

    result = await run(slow_failure)
    assert result.is_error and result.content == "Tool 'slow_failure' failed: ValueError: gave up"


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity here")
async def test_a_slow_sync_tool_may_run_on_every_core_the_loop_may_use() -> None:
    cores = os.sched_getaffinity(0)
    seen: list[set[int]] = []

    @tool
    def slow() -> str:
        """Reads the cores it may run on once the loop has stopped waiting for it directly."""
        threading.Event().wait(0.05)
        seen.append(os.sched_getaffinity(0))
        return "done"

    @tool
    def quick() -> str:
        """Returns at once."""
        return "quick"

    for _ in range(3):  # a quick call first: its worker may be held to the loop's core meanwhile
        assert (await run(quick)).content == "quick"
        assert (await run(slow)).content == "done"
    assert seen == [cores] * 3


async def test_many_sync_tool_calls_keep_a_bounded_number_of_threads_and_files() -> None:
    @tool
    def quick() -> str:
        """Returns at once."""
        return "quick"

    def open_files() -> int:
        return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0

    assert (await run(quick)).content == "quick"
    threads, files = threading.active_count(), open_files()
    for _ in range(200):
        assert (await run(quick)).content == "quick"
    await asyncio.gather(*(run(quick) for _ in range(20)))
    for _ in range(200):
        assert (await run(quick)).content == "quick"
    assert threading.active_count() <= threads + 20
    assert open_files() <= files + 4 * 20
