"""What the command line prints: streamed text, progress, usage, tables."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from turnkit.agent import RunResult, StreamEvent

__all__ = ["Printer", "result_json"]


class Printer:
    """Streams answers to stdout; progress, usage and errors go to stderr."""

    def __init__(self) -> None:
        from rich.console import Console

        self.out = Console(highlight=False, soft_wrap=True)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)

    async def stream(self, events: AsyncIterator[StreamEvent]) -> RunResult:
        """Print a run as it streams; returns its result."""
        result: RunResult | None = None
        status = self.err.status("[dim]thinking…[/dim]", spinner="dots")
        status.start()
        try:
            async for event in events:
                if event.type == "text_delta":
                    status.stop()
                    self.out.print(event.text, end="", markup=False)
                elif event.type == "tool_use" and event.block is not None:
                    status.stop()
                    self.err.print(f"[dim]→ {event.block.name}[/dim]")  # type: ignore[union-attr]
                elif event.type == "done":
                    result = event.result
        finally:
            status.stop()
        assert result is not None, "a stream always ends with done"
        self._finish(result)
        return result

    def _finish(self, result: RunResult) -> None:
        if result.output:
            self.out.print()
        self.out.file.flush()  # the answer first, then what goes to stderr
        if not result.success:
            self.err.print(f"turnkit: error: {result.error}", markup=False)
            return
        usage = result.usage
        self.err.print(f"[dim]{usage.input_tokens} tokens in, {usage.output_tokens} out[/dim]")

    def note(self, text: str) -> None:
        self.err.print(f"[dim]{text}[/dim]")

    def table(self, rows: list[dict[str, Any]]) -> None:
        from rich.table import Table

        table = Table(*rows[0].keys()) if rows else Table()
        for row in rows:
            table.add_row(*(str(value) for value in row.values()))
        self.out.print(table)


def result_json(result: RunResult) -> dict[str, Any]:
    """A RunResult as plain JSON data."""
    usage = result.usage
    return {
        "success": result.success,
        "output": result.output,
        "messages": [m.to_dict() for m in result.messages],
        "usage": {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
        "stop_reason": result.stop_reason,
        "error": result.error,
    }
