"""Tools: functions a model may call, with checked input and safe execution."""

from turnkit.providers.base import ToolSpec
from turnkit.tools.execute import execute_tool_call, result_content
from turnkit.tools.tool import DEFAULT_TOOL_TIMEOUT_S, Tool, ToolInputError, tool

__all__ = [
    "DEFAULT_TOOL_TIMEOUT_S",
    "Tool",
    "ToolInputError",
    "ToolSpec",
    "execute_tool_call",
    "result_content",
    "tool",
]
