"""The embedded local model: turnkit's LocalModel vs llama-cpp-python called directly.

Run: python bench/bench_local.py [--runs N] [--max-tokens N]

Both sides use the same model file (SmolLM2-135M-Instruct, Q4_1), the same
``Llama`` object, prompt and settings (temperature 0, seed 0, the same
thread counts), in the same process; runs are interleaved so that load from
other processes falls on both alike. turnkit evaluates the whole prompt on
every call (that is what makes a reply reproducible), so the direct calls
reset the model first too. Tokens per second count completion tokens over
the wall time of the call, prompt included (a direct stream reports no
usage: its chunks are counted, one per token). Medians over N runs; the ratio is
turnkit's speed relative to the direct call (for load, direct time over
turnkit time), so 1.00 means no overhead and more is faster.

Rows:
- load: constructing the model (turnkit: ``LocalModel().load()`` with its
  cache cleared; direct: ``Llama(...)``).
- request / stream: ``LocalModel.request`` / ``.stream`` against
  ``create_chat_completion`` without and with ``stream=True``.
- tool turn: a request with two tools (JSON-schema grammar) against
  ``create_chat_completion`` with the same messages and schema.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from llama_cpp import Llama

import turnkit.providers._local_runtime as runtime
import turnkit.providers.local as local
from turnkit import Message
from turnkit.providers import ModelRequest, ModelSettings, ToolSpec

PROMPT = "Write a long story about a dragon who learns to cook."
TOOLS = (
    ToolSpec(
        "get_weather",
        "Current weather in a city",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    ToolSpec(
        "add",
        "Add two integers",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    ),
)
TOOL_PROMPT = "Say hello and tell me about dragons."


def threads() -> int:
    return max(1, (os.cpu_count() or 2) // 2)


def load_seconds(runs: int) -> tuple[float, float]:
    """Median load time: turnkit's loader with its cache cleared, then Llama()."""
    path = str(local.default_model_path())
    ours, direct = [], []
    for _ in range(runs):
        runtime._LOADED.clear()
        start = time.perf_counter()
        loaded = local.LocalModel().load()
        ours.append(time.perf_counter() - start)
        loaded.llama.close()
        start = time.perf_counter()
        llama = Llama(
            model_path=path,
            n_ctx=4096,
            n_threads=threads(),
            n_threads_batch=threads(),
            verbose=False,
        )
        direct.append(time.perf_counter() - start)
        llama.close()
    runtime._LOADED.clear()
    return statistics.median(ours), statistics.median(direct)


async def turnkit_request(model: local.LocalModel, request: ModelRequest) -> tuple[int, str]:
    response = await model.request(request)
    return response.usage.output_tokens, json.dumps(response.message.to_dict()["content"])


async def turnkit_stream(model: local.LocalModel, request: ModelRequest) -> tuple[int, str]:
    async for event in model.stream(request):
        if event.type == "done" and event.response is not None:
            content = event.response.message.to_dict()["content"]
            return event.response.usage.output_tokens, json.dumps(content)
    raise RuntimeError("the stream ended without done")


def direct_call(llama: Llama, messages: list[dict[str, str]], **options: Any) -> tuple[int, str]:
    llama.reset()  # turnkit evaluates the whole prompt on every call; so does this
    reply = llama.create_chat_completion(
        messages, temperature=0.0, seed=0, repeat_penalty=runtime.REPEAT_PENALTY, **options
    )
    return reply["usage"]["completion_tokens"], reply["choices"][0]["message"]["content"]


def direct_stream(llama: Llama, messages: list[dict[str, str]], max_tokens: int) -> tuple[int, str]:
    llama.reset()
    chunks = llama.create_chat_completion(
        messages,
        temperature=0.0,
        seed=0,
        repeat_penalty=runtime.REPEAT_PENALTY,
        max_tokens=max_tokens,
        stream=True,
    )
    # a stream reports no usage: each token comes as one chunk with content
    deltas = [chunk["choices"][0]["delta"] for chunk in chunks]
    text = [delta["content"] for delta in deltas if "content" in delta]
    return len(text), "".join(text)


Outcome = tuple[int, str]  # completion tokens, output


async def timed(call: Callable[[], Awaitable[Outcome] | Outcome]) -> tuple[float, int, str]:
    """Tokens per second of one call (awaited when it is a coroutine)."""
    start = time.perf_counter()
    outcome = call()
    tokens, text = await outcome if inspect.isawaitable(outcome) else outcome
    return tokens / (time.perf_counter() - start), tokens, text


def expected(row: str, direct_text: str) -> str:
    """What turnkit's content blocks (as JSON) must contain to match the direct output."""
    if row != "tool turn":
        return json.dumps(direct_text)
    reply = json.loads(direct_text, strict=False)  # an answer or a tool call
    return json.dumps(reply.get("arguments", reply.get("answer")))


Rows = dict[str, tuple[Callable[[], Any], Callable[[], Outcome]]]


async def benchmark_rows(max_tokens: int) -> Rows:
    """Each row's two calls: turnkit's (a coroutine) and the direct one."""
    model = local.LocalModel()
    llama = model.load().llama
    plain = ModelRequest(
        (Message.user(PROMPT),), settings=ModelSettings(max_output_tokens=max_tokens)
    )
    tools = ModelRequest(
        (Message.user(TOOL_PROMPT),), tools=TOOLS, settings=ModelSettings(max_output_tokens=64)
    )
    plain_messages = list((await model.build_prompt(plain)).messages)
    tool_prompt = await model.build_prompt(tools)
    schema = json.loads(tool_prompt.schema or "{}")
    return {
        "request": (
            lambda: turnkit_request(model, plain),
            lambda: direct_call(llama, plain_messages, max_tokens=max_tokens),
        ),
        "stream": (
            lambda: turnkit_stream(model, plain),
            lambda: direct_stream(llama, plain_messages, max_tokens),
        ),
        "tool turn": (
            lambda: turnkit_request(model, tools),
            lambda: direct_call(
                llama,
                list(tool_prompt.messages),
                max_tokens=64,
                response_format={"type": "json_object", "schema": schema},
            ),
        ),
    }


async def generation_rates(rows: Rows, runs: int) -> dict[str, tuple[float, float, bool]]:
    """Median tokens/s per row, turnkit and direct, and whether the outputs matched."""
    rates: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in rows}
    same = dict.fromkeys(rows, True)
    for run in range(runs + 1):  # the first round warms up and is not counted
        for name, (ours, direct) in rows.items():
            if run % 2:  # alternate who goes first
                ours_rate, ours_tokens, ours_text = await timed(ours)
                direct_rate, direct_tokens, direct_text = await timed(direct)
            else:
                direct_rate, direct_tokens, direct_text = await timed(direct)
                ours_rate, ours_tokens, ours_text = await timed(ours)
            if run:
                rates[name][0].append(ours_rate)
                rates[name][1].append(direct_rate)
            same[name] &= ours_tokens == direct_tokens and expected(name, direct_text) in ours_text
    return {
        name: (statistics.median(ours), statistics.median(direct), same[name])
        for name, (ours, direct) in rates.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()

    ours_load, direct_load = load_seconds(args.runs)

    async def run() -> dict[str, tuple[float, float, bool]]:
        return await generation_rates(await benchmark_rows(args.max_tokens), args.runs)

    rates = asyncio.run(run())
    print(f"local model, {threads()} threads, {args.runs} runs (medians)\n")
    print(f"{'':<14}{'turnkit':>12}{'direct':>12}{'ratio':>8}  same output")
    print(f"{'load (s)':<14}{ours_load:>12.3f}{direct_load:>12.3f}{direct_load / ours_load:>8.2f}")
    for name, (ours, direct, same) in rates.items():
        label = f"{name} (tok/s)"
        print(f"{label:<14}{ours:>12.1f}{direct:>12.1f}{ours / direct:>8.2f}  {same}")


if __name__ == "__main__":
    main()
