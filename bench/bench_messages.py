"""Validate, freeze and dump a realistic 200-message history: turnkit vs pydantic-ai.

Run: python bench/bench_messages.py [--repeat N]

The history has text turns, tool calls with nested inputs, tool results,
thinking, and one base64 image (1 MB, then 10 MB). pydantic-ai does the same
work with ``ModelMessagesTypeAdapter.validate_python`` / ``dump_python`` on the
equivalent history, in the same process. Medians over N runs; ratio > 1 means
turnkit is faster.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from pydantic_ai import messages as pa

import turnkit

MB = 1024 * 1024


def tool_input(i: int) -> dict[str, Any]:
    return {
        "query": f"order {i}",
        "filters": {"status": ["open", "held"], "limit": 20},
        "options": [{"field": "date", "desc": True}, {"field": "id", "desc": False}],
    }


def tool_output(i: int) -> str:
    return json.dumps({"hits": [{"id": i * 10 + k, "title": f"result {k} " * 4} for k in range(3)]})


def turnkit_history(image_b64: str) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for i in range(100):
        if i == 0:
            user = [
                {"type": "text", "text": "What is in this picture?"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": image_b64},
                },
            ]
        elif i % 2:
            user = [
                {"type": "tool_result", "tool_use_id": f"toolu_{i - 1}", "content": tool_output(i)}
            ]
        else:
            user = [{"type": "text", "text": f"Follow-up question number {i}. " * 6}]
        history.append({"role": "user", "content": user})
        history.append(
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": "Let me think about it. " * 10,
                        "signature": "c2ln" * 8,
                    },
                    {"type": "text", "text": f"Here is what I found for step {i}. " * 5},
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i}",
                        "name": "search",
                        "input": tool_input(i),
                    },
                ],
            }
        )
    return history


def pydantic_ai_history(image: bytes) -> list[dict[str, Any]]:
    history: list[pa.ModelMessage] = []
    for i in range(100):
        if i == 0:
            parts: list[Any] = [
                pa.UserPromptPart(
                    content=[
                        "What is in this picture?",
                        pa.BinaryContent(data=image, media_type="image/png"),
                    ]
                )
            ]
        elif i % 2:
            parts = [
                pa.ToolReturnPart(
                    tool_name="search", content=tool_output(i), tool_call_id=f"toolu_{i - 1}"
                )
            ]
        else:
            parts = [pa.UserPromptPart(content=f"Follow-up question number {i}. " * 6)]
        history.append(pa.ModelRequest(parts=parts))
        history.append(
            pa.ModelResponse(
                parts=[
                    pa.ThinkingPart(content="Let me think about it. " * 10, signature="c2ln" * 8),
                    pa.TextPart(content=f"Here is what I found for step {i}. " * 5),
                    pa.ToolCallPart(
                        tool_name="search", args=tool_input(i), tool_call_id=f"toolu_{i}"
                    ),
                ]
            )
        )
    return pa.ModelMessagesTypeAdapter.dump_python(history)


def median_ms(
    mine: Callable[[Any], object],
    make_mine: Callable[[], Any],
    peer: Callable[[Any], object],
    make_peer: Callable[[], Any],
    repeat: int,
) -> tuple[float, float]:
    """Median milliseconds of ``mine(make_mine())`` and of ``peer(make_peer())``,
    the inputs made outside the timer, the two timed in turn (so both see the
    machine as it is at that moment: its speed drifts within a run)."""
    mine(make_mine())
    peer(make_peer())
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for fn, make, out in ((mine, make_mine, times[0]), (peer, make_peer, times[1])):
            value = make()
            start = time.perf_counter()
            fn(value)
            out.append(time.perf_counter() - start)
    return statistics.median(times[0]) * 1000, statistics.median(times[1]) * 1000


def compare(size: int, repeat: int) -> list[tuple[str, float, float]]:
    adapter = pa.ModelMessagesTypeAdapter
    raw = os.urandom(size * 3 // 4)
    ours = turnkit_history(base64.b64encode(raw).decode())
    theirs = pydantic_ai_history(raw)
    ours_objs = turnkit.validate_messages(ours)
    theirs_objs = adapter.validate_python(theirs)
    label = f"{size // MB} MB image"

    def row(
        name: str,
        mine: Callable[[Any], object],
        make_mine: Callable[[], Any],
        peer: Callable[[Any], object],
        make_peer: Callable[[], Any],
    ) -> tuple[str, float, float]:
        return (f"{name}, {label}", *median_ms(mine, make_mine, peer, make_peer, repeat))

    return [
        row(
            "validate+freeze",
            turnkit.validate_messages,
            lambda: ours,
            adapter.validate_python,
            lambda: theirs,
        ),
        row(
            "dump to dicts",
            lambda objs: [m.to_dict() for m in objs],
            lambda: ours_objs,
            adapter.dump_python,
            lambda: theirs_objs,
        ),
        row(
            "re-validate built objects",
            turnkit.validate_messages,
            lambda: ours_objs,
            adapter.validate_python,
            lambda: theirs_objs,
        ),
        row(
            "first sight of new image data",
            turnkit.validate_messages,
            lambda: fresh_copy(ours),
            adapter.validate_python,
            lambda: theirs,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=50)
    repeat = parser.parse_args().repeat
    rows = compare(1 * MB, repeat) + compare(10 * MB, repeat)
    print(f"{'case (200 messages)':<44}{'turnkit ms':>12}{'pydantic-ai ms':>16}{'ratio':>8}")
    for name, mine, peer in rows:
        print(f"{name:<44}{mine:>12.3f}{peer:>16.3f}{peer / mine:>7.1f}x")


def fresh_copy(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same history with a new image string object, so no memo can help."""
    copy = [dict(m) for m in history]
    block = dict(copy[0]["content"][1])
    source = dict(block["source"])
    source["data"] = source["data"][:-4] + source["data"][-4:].swapcase().swapcase()
    block["source"] = source
    copy[0]["content"] = [copy[0]["content"][0], block]
    return copy


if __name__ == "__main__":
    main()
