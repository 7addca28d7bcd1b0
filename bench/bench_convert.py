"""Convert a 200-message history into each provider's request, against json.dumps.

Run: python bench/bench_convert.py [--repeat N]

The floor is ``json.dumps`` of the very request turnkit built (what the SDK
must do anyway before sending). Target: conversion at most 3x the floor.
The history is the one of bench_messages.py (text, thinking, nested tool
calls and results, one inline image), as validated turnkit messages.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_messages import turnkit_history

import turnkit
from turnkit.messages import Origin
from turnkit.providers import Model, ModelRequest, ModelSettings, ToolSpec

PROVIDERS = {
    "anthropic": ("turnkit.providers.anthropic", "AnthropicModel", "claude-sonnet-4-6"),
    "openai chat": ("turnkit.providers.openai_chat", "OpenAIChatModel", "gpt-5"),
    "openai responses": ("turnkit.providers.openai_responses", "OpenAIResponsesModel", "gpt-5"),
    "gemini": ("turnkit.providers.gemini", "GeminiModel", "gemini-2.5-flash"),
}


def build_request(origin: Origin) -> ModelRequest:
    image = base64.b64encode(os.urandom(75_000)).decode()
    messages = [
        m.clone(origin=origin) if m.role == "assistant" else m
        for m in turnkit.validate_messages(turnkit_history(image))
    ]
    schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    tools = (ToolSpec("search", "Search the orders", schema),)
    return ModelRequest(
        tuple(messages),
        system="You are helpful.",
        tools=tools,
        settings=ModelSettings(max_output_tokens=1024),
    )


def make_model(module: str, cls: str, name: str) -> Model | None:
    try:
        kind = getattr(__import__(module, fromlist=[cls]), cls)
    except (ImportError, AttributeError):
        return None
    return kind(name, api_key="bench", base_url="http://127.0.0.1:9/v1")


async def median_ms(fn: Any, repeat: int) -> float:
    await fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


async def main(repeat: int) -> None:
    print(f"{'provider (200 messages)':<26}{'convert ms':>12}{'json.dumps ms':>15}{'ratio':>8}")
    for label, (module, cls, name) in PROVIDERS.items():
        model = make_model(module, cls, name)
        if model is None:
            print(f"{label:<26}{'(not available)':>27}")
            continue
        request = build_request(Origin(model.provider, name))
        params = await model.build_params(request)

        async def convert(model: Model = model, request: ModelRequest = request) -> None:
            await model.build_params(request)

        async def dump(params: Any = params) -> None:
            json.dumps(params, default=str)

        ours = await median_ms(convert, repeat)
        floor = await median_ms(dump, repeat)
        print(f"{label:<26}{ours:>12.3f}{floor:>15.3f}{ours / floor:>7.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=50)
    asyncio.run(main(parser.parse_args().repeat))
