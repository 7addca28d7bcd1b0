"""StreamingScriptedModel: a ScriptedModel that streams its replies in small pieces.

For tests and benchmarks of live output: text, thinking and each tool
call's JSON input arrive ``chunk`` characters at a time, ``delay`` seconds
apart, and a stream can stop after ``hold_after`` pieces until ``hold`` is
set (a ``threading.Event``: the test decides when the rest comes).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

from turnkit.messages import TextBlock, ThinkingBlock, ToolUseBlock, thaw
from turnkit.providers.base import ModelEvent, ModelRequest
from turnkit.testing.scripted import Reply, ScriptedModel

__all__ = ["StreamingScriptedModel"]


class StreamingScriptedModel(ScriptedModel):
    """Replies from a script (as :class:`ScriptedModel`), streamed piece by piece.

    ``piece_times`` holds when each piece was yielded (``time.perf_counter``),
    and ``call_times`` when each streamed call began, so a benchmark can
    measure what a reader of the stream sees against the model itself.

    >>> model = StreamingScriptedModel(["Hello there"], chunk=4)
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        chunk: int = 4,
        delay: float = 0.0,
        hold: threading.Event | None = None,
        hold_after: int = 0,
        **options: Any,
    ) -> None:
        super().__init__(replies, **options)
        if chunk < 1:
            raise ValueError("chunk must be at least 1")
        self.chunk, self.delay = chunk, delay
        self.hold, self.hold_after = hold, hold_after
        self.piece_times: list[float] = []
        self.call_times: list[float] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.call_times.append(time.perf_counter())
        response = await self.request(request)
        count = 0
        for event in self._events(response.message.content):
            if event.type != "tool_use":
                if count and self.delay:
                    await asyncio.sleep(self.delay)
                if self.hold is not None and count == self.hold_after:
                    await asyncio.to_thread(self.hold.wait)
                count += 1
                self.piece_times.append(time.perf_counter())
            yield event
        yield ModelEvent("done", response=response)

    def _events(self, content: Iterable[Any]) -> Iterable[ModelEvent]:
        for block in content:
            if isinstance(block, TextBlock):
                for piece in self._pieces(block.text):
                    yield ModelEvent("text_delta", text=piece)
            elif isinstance(block, ThinkingBlock) and not block.redacted:
                for piece in self._pieces(block.thinking):
                    yield ModelEvent("thinking_delta", text=piece)
            elif isinstance(block, ToolUseBlock):
                opened = ToolUseBlock(block.id, block.name, {})
                text = json.dumps(thaw(block.input), ensure_ascii=False)
                for piece in self._pieces(text):
                    yield ModelEvent("tool_input_delta", text=piece, tool_call=opened)
                yield ModelEvent("tool_use", tool_call=block)

    def _pieces(self, text: str) -> list[str]:
        return [text[i : i + self.chunk] for i in range(0, len(text), self.chunk)]
