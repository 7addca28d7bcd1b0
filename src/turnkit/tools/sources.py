"""Tool sources: objects that offer tools when a run starts (an MCP server).

Anything with an async ``list_tools()`` returning :class:`Tool` objects can
go in ``AgentConfig.tools`` next to tools and functions; the agent asks it
for its tools at the start of every run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from turnkit.tools.tool import Tool

__all__ = ["ToolSource", "gather_tools", "is_tool_source"]


@runtime_checkable
class ToolSource(Protocol):
    """Offers tools at run time: ``await source.list_tools()``."""

    async def list_tools(self) -> tuple[Tool, ...]:
        """The tools to offer now."""
        ...


def is_tool_source(item: Any) -> bool:
    """Whether ``item`` is a tool source rather than a tool or a function."""
    if isinstance(item, Tool):
        return False
    import inspect  # here, not at the top: it keeps `import turnkit` light

    return inspect.iscoroutinefunction(getattr(item, "list_tools", None))


async def gather_tools(sources: Sequence[ToolSource]) -> list[Tool]:
    """The tools of every source, in order; a source's error propagates."""
    tools: list[Tool] = []
    for source in sources:
        listed = await source.list_tools()
        for found in listed:
            if not isinstance(found, Tool):
                raise TypeError(f"{source!r}.list_tools() gave {found!r}, not a turnkit Tool")
            tools.append(found)
    return tools
