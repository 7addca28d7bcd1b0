"""@tool and Tool: what the model is told about a tool."""

from __future__ import annotations

from typing import Literal

import pydantic
import pytest

import turnkit
from turnkit import Tool, tool
from turnkit.messages import thaw
from turnkit.providers import ToolSpec
from turnkit.tools._schema import parse_docstring


class Point(pydantic.BaseModel):
    x: float
    y: float


def test_tool_schema_comes_from_the_signature_and_the_docstring() -> None:
    @tool
    def get_weather(city: str, days: int = 1, unit: Literal["C", "F"] = "C") -> str:
        """Forecast for a city.

        Longer text that is not part of the description.

        Args:
            city: The city name.
            days: How many days
                ahead.
            unit: Temperature unit.
        """
        return city

    assert get_weather.name == "get_weather"
    assert get_weather.description == "Forecast for a city."
    assert thaw(get_weather.input_schema) == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city name."},
            "days": {"type": "integer", "default": 1, "description": "How many days ahead."},
            "unit": {
                "type": "string",
                "enum": ["C", "F"],
                "default": "C",
                "description": "Temperature unit.",
            },
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def test_tool_with_arguments_overrides_name_and_description() -> None:
    @tool(name="lookup", description="Find a record.")
    async def find(record_id: int) -> str:
        """Ignored."""
        return str(record_id)

    assert (find.name, find.description) == ("lookup", "Find a record.")
    assert find.spec == ToolSpec("lookup", "Find a record.", find.input_schema)


def test_tool_with_empty_parentheses_works_like_the_bare_decorator() -> None:
    @tool()
    def ping() -> str:
        """Answer pong."""
        return "pong"

    assert ping.name == "ping"
    assert thaw(ping.input_schema) == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }


def test_tool_schema_keeps_nested_models_and_sphinx_parameter_docs() -> None:
    @tool
    def distance(a: Point, b: Point) -> float:
        """Distance between two points.

        :param a: The first point.
        :param b: The second point.
        """
        return 0.0

    schema = thaw(distance.input_schema)
    assert schema["properties"]["a"]["description"] == "The first point."
    assert schema["$defs"]["Point"]["properties"] == {
        "x": {"type": "number"},
        "y": {"type": "number"},
    }
    assert "title" not in schema["$defs"]["Point"]


def test_tool_parameter_named_like_a_pydantic_attribute_is_kept() -> None:
    @tool
    def archive(copy: bool, json: str, title: str) -> str:
        """Archive a document."""
        return json

    assert sorted(archive.input_schema["properties"]) == ["copy", "json", "title"]


def test_tool_refuses_star_args_and_positional_only_parameters() -> None:
    def splat(*names: str) -> str:
        return ""

    def positional(name: str, /) -> str:
        return name

    for fn in (splat, positional):
        with pytest.raises(TypeError, match="passable by keyword"):
            tool(fn)


def test_tool_names_must_suit_every_provider() -> None:
    schema = {"type": "object"}
    with pytest.raises(ValueError, match="1-64 letters"):
        Tool("has space", "", schema, print)
    with pytest.raises(ValueError, match="1-64 letters"):
        Tool("x" * 65, "", schema, print)
    with pytest.raises(TypeError, match="callable"):
        Tool("ok", "", schema, "not a function")  # type: ignore[arg-type]


def test_hand_written_tool_schema_is_frozen_and_caller_changes_do_not_reach_it() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}
    add_one = Tool("add_one", "Add one.", schema, lambda a: a + 1)
    schema["properties"]["a"]["type"] = "string"
    assert add_one.input_schema["properties"]["a"]["type"] == "number"
    with pytest.raises(TypeError):
        add_one.input_schema["type"] = "array"  # type: ignore[index]


def test_tool_and_tool_decorator_are_public() -> None:
    assert turnkit.tool is tool
    assert turnkit.Tool is Tool

    def ping() -> str:
        return "pong"

    made = tool(ping)
    assert tool(made) is made


@pytest.mark.parametrize(
    ("doc", "summary", "params"),
    [
        ("", "", {}),
        ("One line.", "One line.", {}),
        ("First line\ncontinues.\n\nMore.", "First line continues.", {}),
        (
            "Do it.\n\nArgs:\n    a (int): The a.\n    b: The b,\n        continued.\n\n"
            "Returns:\n    Nothing.",
            "Do it.",
            {"a": "The a.", "b": "The b, continued."},
        ),
        (
            "Do it.\n\n:param a: The a.\n:param int b: The b\n    continued.\n:returns: x",
            "Do it.",
            {"a": "The a.", "b": "The b continued."},
        ),
    ],
)
def test_parse_docstring_reads_google_and_sphinx_styles(
    doc: str, summary: str, params: dict[str, str]
) -> None:
    assert parse_docstring(doc) == (summary, params)


def test_tool_resolves_annotations_naming_local_classes() -> None:
    class Filter(pydantic.BaseModel):
        status: Literal["open", "closed"]

    @tool
    def search(query: str, filter: Filter | None = None) -> list[str]:
        """Search tickets."""
        return []

    @tool(name="search_again")
    def search_again(filter: Filter) -> list[str]:
        """Search again."""
        return []

    assert "Filter" in search.input_schema["$defs"]
    assert search_again.input_schema["required"] == ("filter",)


def test_tool_with_unresolvable_annotation_raises_type_error() -> None:
    def broken(x: Missing) -> str:  # type: ignore[name-defined]  # noqa: F821
        return ""

    with pytest.raises(TypeError, match="cannot read the type hints"):
        tool(broken)
