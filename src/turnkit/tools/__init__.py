"""Tools: functions a model may call, with checked input and safe execution."""

from turnkit.providers.base import ToolSpec
from turnkit.tools.execute import execute_tool_call, result_content
from turnkit.tools.sources import ToolSource, gather_tools, is_tool_source
from turnkit.tools.tool import DEFAULT_TOOL_TIMEOUT_S, Tool, ToolInputError, tool

__all__ = [
    "DEFAULT_TOOL_TIMEOUT_S",
    "Tool",
    "ToolInputError",
    "ToolSource",
    "ToolSpec",
    "execute_tool_call",
    "gather_tools",
    "is_tool_source",
    "result_content",
    "tool",
]
