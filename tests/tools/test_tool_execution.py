"""Running tool calls: results, and errors the model can act on, never a crash."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import threading
from typing import Any

import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnkit import ImageBlock, TextBlock, Tool, ToolResultBlock, ToolUseBlock, tool
from turnkit.tools import execute_tool_call, result_content

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n fake").decode()


def call(name: str, /, **arguments: Any) -> ToolUseBlock:
    return ToolUseBlock("call_1", name, arguments)


async def run(made: Tool, /, **arguments: Any) -> ToolResultBlock:
    return await execute_tool_call(call(made.name, **arguments), {made.name: made})


@tool
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


async def test_sync_tool_result_is_json_text_and_runs_off_the_event_loop() -> None:
    threads: list[int] = []

    @tool
    def where(label: str) -> dict[str, Any]:
        """Say where it ran."""
        threads.append(threading.get_ident())
        return {"label": label, "items": [1, 2], "ok": True, "text": "café"}

    result = await run(where, label="x")
    assert result == ToolResultBlock(
        "call_1", '{"label": "x", "items": [1, 2], "ok": true, "text": "café"}'
    )
    assert threads != [threading.get_ident()]


async def test_async_tool_returns_its_string_as_is() -> None:
    @tool
    async def greet(name: str) -> str:
        """Greet someone."""
        await asyncio.Event().wait() if name == "never" else None
        return f"Hello, {name}"

    assert await run(greet, name="Ada") == ToolResultBlock("call_1", "Hello, Ada")


async def test_tool_input_is_coerced_as_pydantic_does_before_the_function_runs() -> None:
    assert (await run(add, a="2", b=3)).content == "5"
    assert (await run(add, a=2)).content == "3"


async def test_invalid_input_becomes_an_error_result_naming_the_field() -> None:
    result = await run(add, a="two")
    assert result.is_error
    assert result.content == (
        "Invalid input for tool 'add': a: Input should be a valid integer, "
        "unable to parse string as an integer (got 'two')"
    )
    missing = await run(add, b=1)
    assert missing.is_error
    assert missing.content == "Invalid input for tool 'add': a: Field required"
    extra = await run(add, a=1, c=2)
    assert extra.content == "Invalid input for tool 'add': c: Extra inputs are not permitted"


async def test_function_never_runs_on_invalid_input() -> None:
    ran: list[int] = []

    @tool
    def record(n: int) -> str:
        """Record n."""
        ran.append(n)
        return "ok"

    await run(record, n=[1])
    assert ran == []


async def test_exception_in_the_tool_becomes_an_error_result_with_type_and_message() -> None:
    @tool
    async def explode(reason: str) -> str:
        """Always fails."""
        raise LookupError(f"no such thing: {reason}")

    result = await run(explode, reason="x")
    assert result == ToolResultBlock(
        "call_1", "Tool 'explode' failed: LookupError: no such thing: x", is_error=True
    )


async def test_unknown_tool_becomes_an_error_result_listing_the_tools() -> None:
    result = await execute_tool_call(call("nope"), {"add": add})
    assert result.is_error
    assert result.content == "Unknown tool 'nope'. Available tools: add."


async def test_tool_returning_an_image_gives_image_content() -> None:
    image = ImageBlock({"type": "base64", "media_type": "image/png", "data": PNG})

    @tool
    def snapshot() -> list[Any]:
        """Take a picture."""
        return [TextBlock("Here it is"), {"type": "image", "source": image.source.to_dict()}]

    @tool
    def only_image() -> ImageBlock:
        """Just the picture."""
        return image

    result = await run(snapshot)
    assert result.content == (TextBlock("Here it is"), image)
    assert not result.is_error
    assert (await run(only_image)).content == (image,)


async def test_tool_returning_broken_blocks_gives_an_error_with_the_path() -> None:
    @tool
    def broken() -> dict[str, Any]:
        """Bad image."""
        return {"type": "image", "source": {"type": "base64", "media_type": "image/png"}}

    result = await run(broken)
    assert result.is_error
    assert "returned a value that cannot be sent" in result.content
    assert "content[0].source.data" in result.content


async def test_tool_returning_unserialisable_data_gives_an_error() -> None:
    @tool
    def opaque() -> object:
        """Returns an object."""
        return object()

    result = await run(opaque)
    assert result.is_error
    assert result.content.startswith("Tool 'opaque' returned a value that cannot be sent")


async def test_tool_returning_models_and_dataclasses_is_dumped_as_json() -> None:
    @dataclasses.dataclass
    class Row:
        id: int
        tags: set[str]

    class Model(pydantic.BaseModel):
        name: str

    @tool
    def rows() -> list[Any]:
        """Rows."""
        return [Row(1, {"a"}), Model(name="m"), None]

    assert json.loads((await run(rows)).content) == [{"id": 1, "tags": ["a"]}, {"name": "m"}, None]


async def test_tool_returning_none_gives_an_empty_result() -> None:
    @tool
    def nothing() -> None:
        """Does nothing."""

    assert await run(nothing) == ToolResultBlock("call_1", "")


async def test_hand_written_tool_checks_input_against_its_json_schema() -> None:
    seen: list[Any] = []

    def keep(tags: list[str], meta: dict[str, Any]) -> str:
        seen.append((tags, meta))
        tags.append("mutable")  # a plain list, not the frozen input
        return "kept"

    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "meta": {"type": "object"},
        },
        "required": ["tags", "meta"],
    }
    keeper = Tool("keep", "Keep tags.", schema, keep)
    assert (await run(keeper, tags=["a"], meta={"k": [1]})).content == "kept"
    assert seen == [(["a", "mutable"], {"k": [1]})]
    bad = await run(keeper, tags=[1], meta={})
    assert bad.is_error
    assert bad.content == "Invalid input for tool 'keep': tags.0: 1 is not of type 'string'"
    missing = await run(keeper, tags=[])
    assert missing.content == "Invalid input for tool 'keep': 'meta' is a required property"


async def test_tool_with_custom_validator_uses_what_it_returns() -> None:
    def validator(data: dict[str, Any]) -> dict[str, Any]:
        if data.get("n", 0) < 0:
            raise ValueError("n must not be negative")
        return {"n": data.get("n", 0) * 10}

    scaled = Tool("scaled", "", {"type": "object"}, lambda n: n, validator=validator)
    assert (await run(scaled, n=2)).content == "20"
    refused = await run(scaled, n=-1)
    assert refused.content == "Invalid input for tool 'scaled': n must not be negative"


async def test_cancelling_a_tool_call_propagates() -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    task = asyncio.create_task(run(wait_forever))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text().filter(lambda k: k != "type"), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(json_values)
def test_json_results_round_trip(value: Any) -> None:
    content = result_content(value)
    if isinstance(value, str):
        assert content == value
    elif value is None:
        assert content == ""
    else:
        assert json.loads(content) == value
