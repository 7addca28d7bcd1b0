"""Running a tool call: always a :class:`ToolResultBlock`, never a crash.

An unknown tool, input that does not match the schema, an exception in the
function, or a return value that cannot be sent all become an error result
(``is_error=True``) whose text tells the model what went wrong.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from turnkit._sync import CallTimeout, call_within
from turnkit.errors import ToolInputError
from turnkit.messages import FileBlock, ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock, thaw
from turnkit.tools.tool import Tool

__all__ = ["execute_tool_call", "result_content"]

_PART_TYPES = (TextBlock, ImageBlock, FileBlock)
_PART_NAMES = frozenset({"text", "image", "file"})


async def execute_tool_call(call: ToolUseBlock, tools: Mapping[str, Tool]) -> ToolResultBlock:
    """Run ``call`` with the tool of its name and return its result block.

    Cancellation (``asyncio.CancelledError``) propagates; every ``Exception``
    (even one whose text cannot be read) and a call past the tool's
    ``timeout_s`` become an error result.
    """
    found = tools.get(call.name)
    if found is None:
        available = ", ".join(sorted(tools)) or "none"
        return _error(call, f"Unknown tool {call.name!r}. Available tools: {available}.")
    problem = _raw_arguments_problem()(call.input)
    if problem is not None:
        return _error(call, f"Invalid input for tool {call.name!r}: {problem}")
    try:
        arguments = found.check_input(thaw(call.input))
    except ToolInputError as err:
        return _error(call, f"Invalid input for tool {call.name!r}: {describe_error(err, False)}")
    except Exception as err:
        return _error(
            call, f"Checking the input of tool {call.name!r} failed: {describe_error(err)}"
        )
    try:
        value = await _run(found, arguments)
    except CallTimeout:
        limit = f"{found.timeout_s:g}s"
        return _error(call, f"Tool {call.name!r} did not finish within {limit}; it was abandoned.")
    except Exception as err:
        return _error(call, f"Tool {call.name!r} failed: {describe_error(err)}")
    try:
        return ToolResultBlock(call.id, result_content(value))
    except Exception as err:
        problem = describe_error(err, False)
        return _error(call, f"Tool {call.name!r} returned a value that cannot be sent: {problem}")


@cache
def _raw_arguments_problem() -> Any:
    """``edges.raw_arguments_problem``, imported on first use (keeps ``import turnkit`` light)."""
    from turnkit.providers.edges import raw_arguments_problem

    return raw_arguments_problem


async def _run(found: Tool, arguments: Mapping[str, Any]) -> Any:
    """The tool's value; ``CallTimeout`` past its own deadline (not a
    ``TimeoutError`` the tool raised). A sync tool is one thread hop."""
    return await call_within(
        found.fn, (), arguments, found.timeout_s, is_async=found.is_async  # type: ignore[arg-type]
    )


def describe_error(err: BaseException, with_type: bool = True) -> str:
    """``Type: message`` of an exception, even one whose ``__str__`` raises."""
    try:
        text = str(err)
    except Exception:
        text = "<its message could not be read>"
    if not with_type:
        return text
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def result_content(value: Any) -> str | list[Any]:
    """What a tool's return value becomes in a tool_result.

    A str is kept; None becomes ""; a text, image or file block (an object, or a
    dict whose ``type`` is one of those), or a list of them, becomes the result's
    content blocks; anything else is dumped as JSON text.
    """
    kind = type(value)
    if kind is str:
        return value
    if value is None:
        return ""
    if kind is int:  # what json.dumps writes, without its machinery
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if _is_part(value):
        return [value]
    if isinstance(value, (list, tuple)) and value and all(_is_part(item) for item in value):
        return list(value)
    return _json_text(value)


def _is_part(value: Any) -> bool:
    if isinstance(value, _PART_TYPES):
        return True
    return isinstance(value, dict) and value.get("type") in _PART_NAMES


def _json_text(value: Any) -> str:
    """Valid JSON text: NaN and infinities become the strings "NaN", "Infinity"."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        import pydantic_core  # models, dataclasses, dates, UUIDs, sets, NaN...

        try:
            return pydantic_core.to_json(value, inf_nan_mode="strings").decode()
        except pydantic_core.PydanticSerializationError as err:
            raise TypeError(f"not JSON-serialisable ({err})") from None


def _error(call: ToolUseBlock, text: str) -> ToolResultBlock:
    return ToolResultBlock(call.id, text, is_error=True)
