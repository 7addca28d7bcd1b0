"""Message: wire round trip, builders, clone, images from URLs, equality."""

from __future__ import annotations

import base64
from typing import Any

import pytest

import turnkit
from turnkit import (
    Base64Source,
    ImageBlock,
    Message,
    Origin,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
    validate_messages,
)

from ._assertions import assert_invalid

FULL = {
    "role": "assistant",
    "content": [
        {"type": "thinking", "thinking": "plan", "signature": "sig"},
        {"type": "text", "text": "Looking.", "cache": {"ttl": "5m"}},
        {"type": "tool_use", "id": "c1", "name": "search", "input": {"q": "x", "n": [1, 2.5]}},
    ],
    "type": "custom",
    "id": "m1",
    "metadata": {"tags": ["a"], "score": None},
    "origin": {"provider": "anthropic", "model": "claude"},
    "invocation_id": "run-1",
}


def test_every_field_survives_the_wire_round_trip() -> None:
    message = Message.from_dict(FULL)
    assert message.to_dict() == FULL
    assert Message.from_dict(message.to_dict()) == message


def test_to_dict_omits_optional_fields_at_their_default() -> None:
    assert Message.user("hi").to_dict() == {
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
    }
    assert Message("assistant", ()).to_dict() == {"role": "assistant", "content": []}


def test_to_dict_keeps_optional_fields_set_to_empty_values() -> None:
    message = Message("user", (), metadata={}, id="")
    assert message.to_dict() == {"role": "user", "content": [], "id": "", "metadata": {}}
    assert Message.from_dict(message.to_dict()) == message


def test_from_dict_accepts_any_mapping_and_refuses_other_values() -> None:
    from types import MappingProxyType

    assert Message.from_dict(MappingProxyType({"role": "user", "content": []})) == Message(
        "user", ()
    )
    assert_invalid(lambda: Message.from_dict("hi"), "", "expected a message object")
    assert_invalid(
        lambda: Message.from_dict({"role": "user", "content": "hi"}), "content", "text block"
    )


def test_messages_and_blocks_are_exported_from_turnkit() -> None:
    for name in ("Message", "TextBlock", "ImageBlock", "FileBlock", "ThinkingBlock"):
        assert getattr(turnkit, name) is getattr(turnkit.messages, name)
    for name in ("ToolUseBlock", "ToolResultBlock", "Base64Source", "UrlSource"):
        assert getattr(turnkit, name) is getattr(turnkit.messages, name)
    assert turnkit.InvalidMessageError is turnkit.messages.InvalidMessageError


# -- builders -------------------------------------------------------------------


def test_user_builder_turns_str_parts_into_text_blocks() -> None:
    image = {"type": "image", "source": {"type": "url", "url": "https://a.example/x.png"}}
    message = Message.user("look", image, TextBlock("here"), id="u1")
    assert message.role == "user"
    assert message.content == (
        TextBlock("look"),
        ImageBlock(UrlSource("https://a.example/x.png")),
        TextBlock("here"),
    )
    assert message.id == "u1"


def test_assistant_builder_takes_fields_and_checks_blocks() -> None:
    call = ToolUseBlock("c1", "f", {})
    message = Message.assistant("ok", call, origin={"provider": "p", "model": "m"})
    assert message.content == (TextBlock("ok"), call)
    assert message.origin == Origin("p", "m")
    assert_invalid(lambda: Message.user(call), "content[0]", "not allowed in a user message")
    assert_invalid(lambda: Message.assistant(call, call), "content[1].id", "duplicate")


def test_system_builder_holds_one_text_block() -> None:
    assert Message.system("be brief") == Message("system", (TextBlock("be brief"),))
    assert_invalid(lambda: Message.system(5), "content[0].text", "expected a string")  # type: ignore[arg-type]


def test_empty_builders_give_empty_content() -> None:
    assert Message.user().content == ()
    assert Message.assistant().content == ()


def test_text_joins_the_text_blocks_only() -> None:
    message = Message.assistant("a", ThinkingBlock("hidden"), "b", ToolUseBlock("c", "f", {}))
    assert message.text == "ab"


# -- direct construction ------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "path", "problem"),
    [
        (
            lambda: Message("user", [{"type": "tool_use", "id": "c", "name": "f", "input": {}}]),
            "content[0]",
            "a tool_use block is not allowed in a user message",
        ),
        (lambda: Message("user", "hi"), "content", "use a text block"),
        (lambda: Message("user", {"type": "text"}), "content", "expected a list"),
        (lambda: Message("bot", ()), "role", "unknown role 'bot'"),
        (lambda: Message("user", (), type="note"), "type", "'note'"),
        (lambda: Message("user", (), id=1), "id", "expected a string"),
        (lambda: Message("user", (), invocation_id=1), "invocation_id", "expected a string"),
        (lambda: Message("user", (), metadata=[1]), "metadata", "expected a JSON object"),
        (lambda: Message("user", (), metadata={"a": {1}}), "metadata.a", "not plain data"),
        (lambda: Message("user", (), origin={"provider": "p"}), "origin.model", "required"),
        (lambda: Message("user", ({"type": "text", "text": 1},)), "content[0].text", "string"),
        (lambda: Message("system", [TextBlock("a"), ThinkingBlock("t")]), "content[1]", ""),
    ],
)
def test_direct_construction_raises_with_a_relative_path(
    build: Any, path: str, problem: str
) -> None:
    assert_invalid(build, path, problem)


def test_content_given_as_a_list_of_dicts_or_objects_is_frozen_to_a_tuple() -> None:
    message = Message("user", [{"type": "text", "text": "a"}, TextBlock("b")])
    assert message.content == (TextBlock("a"), TextBlock("b"))
    assert type(message.content) is tuple


# -- clone ----------------------------------------------------------------------------


def test_clone_applies_changes_and_checks_them() -> None:
    message = Message.assistant("hi", ToolUseBlock("c1", "f", {}), id="a")
    assert message.clone() is message
    renamed = message.clone(id="b", metadata={"k": [1]})
    assert (renamed.id, renamed.metadata, renamed.content) == ("b", {"k": (1,)}, message.content)
    assert message.id == "a"
    assert_invalid(lambda: message.clone(role="user"), "content[1]", "not allowed in a user")
    assert_invalid(lambda: message.clone(content="hi"), "content", "use a text block")
    assert_invalid(lambda: message.clone(metadata={"a": b""}), "metadata.a", "bytes")


def test_clone_converts_dict_content() -> None:
    message = Message.user("a").clone(content=[{"type": "text", "text": "b"}])
    assert message.content == (TextBlock("b"),)


# -- append_image_url_block -------------------------------------------------------


def test_append_image_url_block_with_an_empty_url_returns_the_same_message() -> None:
    message = Message.user("hi")
    assert message.append_image_url_block("") is message


def test_append_image_url_block_adds_a_url_source_for_http_urls() -> None:
    message = Message.user("hi", id="u1")
    changed = message.append_image_url_block("https://a.example/cat.png")
    assert changed.content == (TextBlock("hi"), ImageBlock(UrlSource("https://a.example/cat.png")))
    assert changed.id == "u1"
    assert message.content == (TextBlock("hi"),)


def image_of(url: str) -> Base64Source:
    source = Message.user().append_image_url_block(url).content[0].source
    assert isinstance(source, Base64Source)
    return source


@pytest.mark.parametrize(
    "url",
    [
        "data:image/png;base64,aGVsbG8=",
        "data:image/png;base64,aGVsbG8",  # unpadded
        "data:image/png;base64,aGVsbG9=",  # non-zero padding bits
        "data:image/png;base64,%61%47%56%73%62%47%38%3D",  # percent-encoded
        "data:image/png;base64,%61GVsbG8",  # percent-encoded and unpadded
        "data:image/png;name=x.png;base64,aGVsbG8=",
        "data:image/png,hello",  # not base64: the bytes themselves
        "data:image/png,h%65llo",
    ],
)
def test_data_url_becomes_a_canonical_base64_source(url: str) -> None:
    source = image_of(url)
    assert source.media_type == "image/png"
    assert base64.b64decode(source.data) == b"hello"
    assert source.data == "aGVsbG8="


def test_data_url_that_is_already_canonical_is_kept_as_is() -> None:
    data = base64.b64encode(bytes(range(256))).decode()
    assert image_of(f"data:image/webp;base64,{data}") == Base64Source("image/webp", data)


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("data:text/plain;base64,aGk=", "unsupported image type 'text/plain'"),
        ("data:application/pdf;base64,aGk=", "unsupported image type 'application/pdf'"),
        ("data:,hello", "unsupported image type 'text/plain'"),
        ("data:image/png;base64,!!!!", "invalid base64"),
        ("data:image/png;base64,a", "invalid base64"),
        ("data:image/png;base64", "malformed data: URL"),
        ("data:image/png;base64,", "no data"),
        ("data:image/png,", "no data"),
    ],
)
def test_bad_data_urls_are_refused_at_the_url(url: str, problem: str) -> None:
    assert_invalid(lambda: Message.user("hi").append_image_url_block(url), "url", problem)


@pytest.mark.parametrize("url", ["ftp://a.example/x.png", "a.example/x.png", "/x.png"])
def test_append_image_url_block_refuses_urls_that_are_not_http(url: str) -> None:
    assert_invalid(
        lambda: Message.user("hi").append_image_url_block(url), "url", "absolute http(s) URL"
    )


def test_append_image_url_block_to_a_system_message_is_refused() -> None:
    assert_invalid(
        lambda: Message.system("s").append_image_url_block("https://a.example/x.png"),
        "content[1]",
        "an image block is not allowed in a system message",
    )


# -- equality and hashing ---------------------------------------------------------------


def test_messages_compare_by_value() -> None:
    assert Message.from_dict(FULL) == Message.from_dict(FULL)
    assert Message.user("a") != Message.user("b")
    assert Message.user("a") != Message.assistant("a")
    assert Message.user("a") != Message.user("a", id="x")
    assert ToolResultBlock("c", "x") != ToolResultBlock("c", "x", is_error=True)


def test_equal_messages_hash_equal_and_work_as_keys() -> None:
    first, second = Message.from_dict(FULL), Message.from_dict(FULL)
    assert hash(first) == hash(second)
    assert {first: 1}[second] == 1
    assert len({Message.user("a"), Message.user("a"), Message.user("b")}) == 2


def test_blocks_and_sources_hash_by_value() -> None:
    assert hash(ToolUseBlock("c", "f", {"a": [1, {"b": 2}]})) == hash(
        ToolUseBlock("c", "f", {"a": [1, {"b": 2}]})
    )
    assert len({ImageBlock(Base64Source("image/png", "aGk=")) for _ in range(3)}) == 1


def test_validated_objects_are_reused_as_they_are() -> None:
    message = Message.from_dict(FULL)
    assert validate_messages([message])[0] is message
