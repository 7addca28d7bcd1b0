"""Per-run framework overhead of the agent loop: turnkit vs pydantic-ai and openai-agents.

Run: python bench/bench_agent.py [--repeat N] [--imports N]

Every framework runs the same work against its own scripted model (no network,
no real model): turnkit's ``ScriptedModel``, pydantic-ai's ``FunctionModel``,
and a small ``agents.models.interface.Model`` subclass for openai-agents
(tracing disabled). The timings are therefore what each framework itself costs
around a model call:

- single turn: ``run("...")`` answered with text;
- one tool call: the model calls ``add(a, b)``, the tool runs, the model answers;
- one sync tool call: the same with ``add`` a plain function, which each
  framework runs off the event loop in a worker thread (turnkit: a reused
  daemon thread; the peers: ``asyncio.to_thread`` / anyio's thread pool);
- 25-turn conversation: 25 ``prompt()`` calls on one agent, history carried
  over (pydantic-ai: ``message_history``; openai-agents: ``to_input_list()``).

Agents and scripts are built outside the timer. Medians over N runs; the
ratio is the faster peer's time over turnkit's (higher is better for turnkit).
Then the wall time of ``import <package>`` in a fresh interpreter (median of a
few runs, minus an empty interpreter's start-up) and ``-X importtime``'s
cumulative figure for the package.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

TURNS = 25


# -- turnkit -----------------------------------------------------------------


def turnkit_cases() -> dict[str, Callable[[], Callable[[], Awaitable[Any]]]]:
    import turnkit
    from turnkit.testing import ScriptedModel

    @turnkit.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @turnkit.tool(name="add")
    def add_sync(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    call = turnkit.Message.assistant(turnkit.ToolUseBlock("call_1", "add", {"a": 2, "b": 3}))

    def agent(replies: list[Any], tools: list[Any] | None = None) -> turnkit.Agent:
        model = ScriptedModel(replies)
        return turnkit.Agent(turnkit.AgentConfig("bench", model=model, tools=tools or ()))

    def single() -> Callable[[], Awaitable[Any]]:
        built = agent(["The answer."])
        return lambda: built.run("Question?")

    def tool_call() -> Callable[[], Awaitable[Any]]:
        built = agent([call, "It is 5."], [add])
        return lambda: built.run("What is 2+3?")

    def sync_tool_call() -> Callable[[], Awaitable[Any]]:
        built = agent([call, "It is 5."], [add_sync])
        return lambda: built.run("What is 2+3?")

    def conversation() -> Callable[[], Awaitable[Any]]:
        built = agent([f"Reply {i}." for i in range(TURNS)])

        async def talk() -> None:
            for i in range(TURNS):
                result = await built.prompt(f"Message {i}?")
                assert result.success
            assert len(built.get_history()) == 2 * TURNS

        return talk

    return {
        "single turn": single,
        "one tool call": tool_call,
        "one sync tool call": sync_tool_call,
        "25-turn prompt()": conversation,
    }


# -- pydantic-ai -------------------------------------------------------------


def pydantic_ai_cases() -> dict[str, Callable[[], Callable[[], Awaitable[Any]]]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def answer(messages: list[Any], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("The answer.")])

    def tool_then_answer(messages: list[Any], info: AgentInfo) -> ModelResponse:
        if any(isinstance(p, ToolReturnPart) for p in messages[-1].parts):
            return ModelResponse(parts=[TextPart("It is 5.")])
        return ModelResponse(parts=[ToolCallPart("add", {"a": 2, "b": 3}, "call_1")])

    plain = Agent(FunctionModel(answer))
    with_tool = Agent(FunctionModel(tool_then_answer))
    with_sync_tool = Agent(FunctionModel(tool_then_answer))

    @with_tool.tool_plain
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @with_sync_tool.tool_plain(name="add")
    def add_sync(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async def talk() -> None:
        history: list[Any] = []
        for i in range(TURNS):
            result = await plain.run(f"Message {i}?", message_history=history)
            history = result.all_messages()
        assert len(history) == 2 * TURNS

    return {
        "single turn": lambda: lambda: plain.run("Question?"),
        "one tool call": lambda: lambda: with_tool.run("What is 2+3?"),
        "one sync tool call": lambda: lambda: with_sync_tool.run("What is 2+3?"),
        "25-turn prompt()": lambda: talk,
    }


# -- openai-agents -----------------------------------------------------------


def openai_agents_model() -> Any:
    """A scripted ``agents`` Model: a tool call when tools are offered, then text."""
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    def text(value: str) -> ResponseOutputMessage:
        part = ResponseOutputText(type="output_text", text=value, annotations=[])
        return ResponseOutputMessage(
            id="msg_1", type="message", role="assistant", status="completed", content=[part]
        )

    class Scripted(Model):
        async def get_response(
            self,
            system_instructions: Any,
            input: Any,
            model_settings: Any,
            tools: list[Any],
            *args: Any,
            **kwargs: Any,
        ) -> ModelResponse:
            answered = isinstance(input, list) and any(
                isinstance(item, dict) and item.get("type") == "function_call_output"
                for item in input
            )
            if tools and not answered:
                call = ResponseFunctionToolCall(
                    type="function_call", call_id="call_1", name="add", arguments='{"a": 2, "b": 3}'
                )
                output: list[Any] = [call]
            else:
                output = [text("It is 5." if answered else "The answer.")]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    return Scripted()


def openai_agents_cases() -> dict[str, Callable[[], Callable[[], Awaitable[Any]]]]:
    from agents import Agent, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)  # its default exports traces over the network

    @function_tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @function_tool(name_override="add")
    def add_sync(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    plain = Agent(name="bench", model=openai_agents_model())
    with_tool = Agent(name="bench", model=openai_agents_model(), tools=[add])
    with_sync_tool = Agent(name="bench", model=openai_agents_model(), tools=[add_sync])

    async def talk() -> None:
        history: list[Any] = []
        for i in range(TURNS):
            result = await Runner.run(plain, [*history, {"role": "user", "content": f"M {i}?"}])
            history = result.to_input_list()
        assert len(history) == 2 * TURNS

    return {
        "single turn": lambda: lambda: Runner.run(plain, "Question?"),
        "one tool call": lambda: lambda: Runner.run(with_tool, "What is 2+3?"),
        "one sync tool call": lambda: lambda: Runner.run(with_sync_tool, "What is 2+3?"),
        "25-turn prompt()": lambda: talk,
    }


# -- measuring ---------------------------------------------------------------


async def median_ms(make: Callable[[], Callable[[], Awaitable[Any]]], repeat: int) -> float:
    """Median milliseconds of one run; each run's setup is made outside the timer."""
    for _ in range(max(3, repeat // 10)):
        await make()()
    times = []
    for _ in range(repeat):
        run = make()
        start = time.perf_counter()
        await run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def import_times(module: str, runs: int) -> tuple[float, float]:
    """(wall ms of ``import module`` above an empty interpreter, importtime cumulative ms)."""

    def wall(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        return time.perf_counter() - start

    empty = statistics.median(wall("pass") for _ in range(runs))
    full = statistics.median(wall(f"import {module}") for _ in range(runs))
    cumulative = []
    for _ in range(runs):
        err = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"],
            check=True,
            capture_output=True,
            text=True,
        ).stderr
        found = re.search(rf"\|\s*(\d+) \| {re.escape(module)}\s*$", err, re.MULTILINE)
        cumulative.append(int(found[1]) / 1000 if found else float("nan"))
    return (full - empty) * 1000, statistics.median(cumulative)


async def run_all(repeat: int) -> list[tuple[str, float, float, float]]:
    ours, pai, oai = turnkit_cases(), pydantic_ai_cases(), openai_agents_cases()
    rows = []
    for name in ours:
        rows.append(
            (
                name,
                await median_ms(ours[name], repeat),
                await median_ms(pai[name], repeat),
                await median_ms(oai[name], repeat),
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--imports", type=int, default=7)
    args = parser.parse_args()
    rows = asyncio.run(run_all(args.repeat))
    print(
        f"{'per run (median)':<22}{'turnkit ms':>12}{'pydantic-ai':>13}{'openai-agents':>15}"
        f"{'vs faster':>11}"
    )
    for name, mine, pai, oai in rows:
        print(f"{name:<22}{mine:>12.3f}{pai:>13.3f}{oai:>15.3f}{min(pai, oai) / mine:>10.1f}x")
    print()
    print(f"{'import (median)':<22}{'wall ms':>12}{'importtime ms':>15}")
    for module in ("turnkit", "pydantic_ai", "agents"):
        wall, cumulative = import_times(module, args.imports)
        print(f"{module:<22}{wall:>12.1f}{cumulative:>15.1f}")


if __name__ == "__main__":
    main()
