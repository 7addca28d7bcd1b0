"""Blocks and sources: built directly or from dicts, checked the same way."""

from __future__ import annotations

from typing import Any

import pytest

from turnkit import (
    Base64Source,
    CacheControl,
    FileBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
    validate_blocks,
)

from ._assertions import assert_invalid

PNG = {"type": "base64", "media_type": "image/png", "data": "aGk="}

WIRE_BLOCKS = [
    {"type": "text", "text": "hello"},
    {"type": "text", "text": "", "cache": {}},
    {"type": "text", "text": "cached", "cache": {"ttl": "1h"}},
    {"type": "image", "source": PNG},
    {"type": "image", "source": {"type": "url", "url": "https://a.example/x.png"}},
    {
        "type": "image",
        "source": {"type": "url", "url": "https://a.example/x", "media_type": "image/webp"},
    },
    {"type": "file", "source": {**PNG, "media_type": "application/pdf"}, "filename": "a.pdf"},
    {"type": "thinking", "thinking": "hmm"},
    {"type": "thinking", "thinking": "", "signature": "sig", "redacted": True},
    {"type": "tool_use", "id": "c1", "name": "search", "input": {"q": ["x", {"n": 1}]}},
    {"type": "tool_result", "tool_use_id": "c1", "content": "found"},
    {"type": "tool_result", "tool_use_id": "c1", "content": "boom", "is_error": True},
    {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": [{"type": "text", "text": "see"}, {"type": "image", "source": PNG}],
    },
]


@pytest.mark.parametrize("wire", WIRE_BLOCKS, ids=lambda wire: wire["type"])
def test_block_to_dict_gives_back_its_wire_shape(wire: dict[str, Any]) -> None:
    (block,) = validate_blocks([wire])
    assert block.to_dict() == wire
    assert validate_blocks([block.to_dict()]) == (block,)


def test_to_dict_omits_optional_fields_at_their_default() -> None:
    assert TextBlock("a").to_dict() == {"type": "text", "text": "a"}
    assert ThinkingBlock("t").to_dict() == {"type": "thinking", "thinking": "t"}
    assert ToolResultBlock("c1", "ok").to_dict() == {
        "type": "tool_result",
        "tool_use_id": "c1",
        "content": "ok",
    }
    assert UrlSource("https://a.example/x").to_dict() == {
        "type": "url",
        "url": "https://a.example/x",
    }
    assert CacheControl().to_dict() == {}


def test_blocks_built_directly_equal_blocks_built_from_dicts() -> None:
    built = (
        TextBlock("hello"),
        TextBlock("cached", CacheControl("1h")),
        ImageBlock(Base64Source("image/png", "aGk=")),
        FileBlock(Base64Source("application/pdf", "aGk="), "a.pdf"),
        ThinkingBlock("", "sig", redacted=True),
        ToolUseBlock("c1", "search", {"q": ["x", {"n": 1}]}),
        ToolResultBlock("c1", "boom", is_error=True),
    )
    indexes = [0, 2, 3, 6, 8, 9, 11]
    assert built == validate_blocks([WIRE_BLOCKS[i] for i in indexes])


def test_nested_parts_given_as_dicts_are_converted() -> None:
    assert TextBlock("a", {"ttl": "5m"}).cache == CacheControl("5m")
    assert ImageBlock(PNG).source == Base64Source("image/png", "aGk=")
    assert FileBlock({"type": "url", "url": "https://a.example/f"}, "f").source == UrlSource(
        "https://a.example/f"
    )
    result = ToolResultBlock("c1", [{"type": "text", "text": "x"}, TextBlock("y")])
    assert result.content == (TextBlock("x"), TextBlock("y"))


@pytest.mark.parametrize(
    ("build", "path", "problem"),
    [
        (lambda: TextBlock(5), "text", "expected a string"),
        (lambda: TextBlock("a", "5m"), "cache", ""),
        (lambda: TextBlock("a", {"ttl": "1d"}), "cache.ttl", "'1d'"),
        (lambda: CacheControl("1d"), "ttl", "'1d'"),
        (lambda: ImageBlock("https://a.example/x.png"), "source", "expected a source object"),
        (lambda: ImageBlock({**PNG, "data": "YR=="}), "source.data", "non-zero padding bits"),
        (lambda: ImageBlock({**PNG, "kind": 1}), "source.kind", "unknown field"),
        (lambda: ImageBlock({"type": "ftp"}), "source.type", "unknown source type"),
        (
            lambda: ImageBlock(Base64Source("application/pdf", "aGk=")),
            "source.media_type",
            "unsupported image type",
        ),
        (
            lambda: ImageBlock(UrlSource("https://a.example/x", "text/html")),
            "source.media_type",
            "unsupported image type",
        ),
        (lambda: Base64Source("image/png", "aGk"), "data", "not canonical base64"),
        (lambda: Base64Source("png", "aGk="), "media_type", "type/subtype"),
        (lambda: UrlSource("ftp://a.example/x"), "url", "absolute http(s) URL"),
        (lambda: UrlSource("https://a.example/x", "bad"), "media_type", "type/subtype"),
        (lambda: FileBlock(PNG, ""), "filename", "must not be empty"),
        (lambda: ThinkingBlock(None), "thinking", "expected a string"),
        (lambda: ThinkingBlock("t", 5), "signature", "expected a string"),
        (lambda: ThinkingBlock("t", redacted="yes"), "redacted", "expected a boolean"),
        (lambda: ToolUseBlock("", "f", {}), "id", "must not be empty"),
        (lambda: ToolUseBlock("c", None, {}), "name", "expected a string"),
        (lambda: ToolUseBlock("c", "f", [1]), "input", "expected a JSON object"),
        (lambda: ToolUseBlock("id", "name", {"x": b""}), "input.x", "not plain data (bytes)"),
        (lambda: ToolUseBlock("c", "f", {"a": [{1: 2}]}), "input.a[0]", "not plain data"),
        (lambda: ToolResultBlock("", "x"), "tool_use_id", "must not be empty"),
        (lambda: ToolResultBlock("c", 5), "content", "expected a string or a list"),
        (lambda: ToolResultBlock("c", ["x"]), "content[0]", "use a text block"),
        (lambda: ToolResultBlock("c", [{"type": "text"}]), "content[0].text", "required"),
        (
            lambda: ToolResultBlock("c", [ThinkingBlock("t")]),
            "content[0]",
            "a thinking block cannot be inside a tool_result",
        ),
        (lambda: ToolResultBlock("c", "x", is_error=1), "is_error", "expected a boolean"),
        (
            lambda: ToolResultBlock("c", [TextBlock("x")], is_error=True),
            "content",
            "must be a string when is_error is true",
        ),
    ],
)
def test_direct_construction_raises_with_a_relative_path(
    build: Any, path: str, problem: str
) -> None:
    assert_invalid(build, path, problem)


def test_tool_use_input_is_required() -> None:
    with pytest.raises(TypeError):
        ToolUseBlock("c", "f")  # type: ignore[call-arg]
    assert ToolUseBlock("c", "f", {}).input == {}


# -- validate_blocks ------------------------------------------------------------


def test_validate_blocks_accepts_dicts_objects_and_both() -> None:
    text = TextBlock("a")
    assert validate_blocks([{"type": "text", "text": "a"}]) == (text,)
    assert validate_blocks((text,))[0] is text
    mixed = validate_blocks([text, {"type": "image", "source": PNG}])
    assert mixed == (text, ImageBlock(Base64Source("image/png", "aGk=")))
    assert validate_blocks([]) == ()


def test_validate_blocks_refuses_a_bare_string_item() -> None:
    assert_invalid(
        lambda: validate_blocks([TextBlock("a"), "and more"]), "blocks[1]", "use a text block"
    )


@pytest.mark.parametrize("value", ["text", None, {"type": "text", "text": "a"}])
def test_validate_blocks_refuses_what_is_not_a_list(value: object) -> None:
    assert_invalid(lambda: validate_blocks(value), "blocks", "expected a list of content blocks")


def test_validate_blocks_names_the_failing_block_under_its_path() -> None:
    assert_invalid(
        lambda: validate_blocks([{"type": "image", "source": {**PNG, "data": "!"}}]),
        "blocks[0].source.data",
        "not canonical base64",
    )
    assert_invalid(
        lambda: validate_blocks([{"type": "video"}], path="prompt"),
        "prompt[0].type",
        "unknown block type 'video'",
    )


def test_validate_blocks_refuses_duplicate_tool_use_ids() -> None:
    first = {"type": "tool_use", "id": "c1", "name": "f", "input": {}}
    assert_invalid(
        lambda: validate_blocks([first, ToolUseBlock("c1", "g", {})]),
        "blocks[1].id",
        "duplicate tool_use id 'c1'",
    )


def test_base64_source_repr_does_not_print_the_data() -> None:
    source = Base64Source("image/png", "AAAA" * 1000)
    assert "AAAAAAAA" not in repr(source)
    assert "4000" in repr(source)
