"""msgspec's error wording, which ``messages/_wire.py`` translates, pinned per kind.

``_wire`` reads msgspec's messages (msgspec gives no structured error), so
pyproject pins msgspec to the minor version these tests cover. Each kind of
message is checked twice: msgspec's own wording (the canary: an upgrade
that rewords it fails here, naming the kind) and turnkit's translation.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from turnkit.errors import InvalidMessageError
from turnkit.messages import Message
from turnkit.messages._wire import from_wire

KINDS = [
    (
        "missing field",
        {"role": "user"},
        "Object missing required field `content`",
        "messages[0].content: required field is missing",
    ),
    (
        "unknown field",
        {"role": "user", "content": [], "bogus": 1},
        "Object contains unknown field `bogus`",
        "messages[0].bogus: unknown field",
    ),
    (
        "bad enum value",
        {"role": "bot", "content": []},
        "Invalid enum value 'bot' - at `$.role`",
        "messages[0].role: unknown role 'bot' (use system, user or assistant)",
    ),
    (
        "bad tag value",
        {"role": "user", "content": [{"type": "nope"}]},
        "Invalid value 'nope' - at `$.content[0].type`",
        "messages[0].content[0].type: unknown block type 'nope' (use text, image, file, "
        "thinking, tool_use or tool_result)",
    ),
    (
        "wrong type",
        {"role": "user", "content": [{"type": "text", "text": 1}]},
        "Expected `str`, got `int` - at `$.content[0].text`",
        "messages[0].content[0].text: expected a string, got an integer",
    ),
    (
        "wrong type, null",
        {"role": "user", "content": [{"type": "text", "text": None}]},
        "Expected `str`, got `null` - at `$.content[0].text`",
        "messages[0].content[0].text: expected a string, got null",
    ),
    (
        "string for a list",
        {"role": "user", "content": "hi"},
        "Expected `array`, got `str` - at `$.content`",
        "messages[0].content: expected a list of content blocks, got a string (use a text block)",
    ),
    (
        "string for a block",
        {"role": "user", "content": ["hi"]},
        "Expected `object`, got `str` - at `$.content[0]`",
        "messages[0].content[0]: expected a content block, got a string (use a text block)",
    ),
    (
        "not a message",
        5,
        "Expected `object`, got `int`",
        "messages[0]: expected a message object, got an integer",
    ),
    (
        "nested missing field",
        {"role": "user", "content": [{"type": "text"}]},
        "Object missing required field `text` - at `$.content[0]`",
        "messages[0].content[0].text: required field is missing",
    ),
    (
        "error raised in __post_init__",
        {"role": "user", "content": [{"type": "text", "text": "a", "cache": {"ttl": "9m"}}]},
        "ttl: expected one of '5m', '1h', got '9m' - at `$.content[0].cache`",
        "messages[0].content[0].cache.ttl: expected one of '5m', '1h', got '9m'",
    ),
]


@pytest.mark.parametrize(
    ("value", "raw", "translated"), [k[1:] for k in KINDS], ids=[k[0] for k in KINDS]
)
def test_each_msgspec_error_kind_is_worded_as_pinned_and_translated(
    value: Any, raw: str, translated: str
) -> None:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert(value, Message)
    assert str(caught.value) == raw
    with pytest.raises(InvalidMessageError) as ours:
        from_wire(value, Message, "messages[0]", messages=True)
    assert str(ours.value) == translated


def test_a_non_string_key_is_worded_as_pinned_and_translated() -> None:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.convert({1: "a"}, dict[str, str])
    assert str(caught.value) == "Expected `str`, got `int` - at `key` in `$`"
    with pytest.raises(InvalidMessageError, match=r"^meta: object keys must be strings$"):
        from_wire({1: "a"}, dict[str, str], "meta")


def test_msgspec_is_the_pinned_minor_version() -> None:
    assert msgspec.__version__.startswith("0.23."), (
        "messages/_wire.py translates msgspec's error wording; rerun these tests "
        "and move the pin in pyproject.toml together"
    )
