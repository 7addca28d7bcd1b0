"""Tool input and metadata must be plain JSON data, refused with the offending path."""

from __future__ import annotations

import decimal
import math
from collections import OrderedDict
from typing import Any

import pytest

from turnkit import Message, ToolUseBlock, validate_messages
from turnkit.messages import FrozenDict, thaw
from turnkit.messages._json import freeze_json

from ._assertions import assert_invalid


def call_with(tool_input: Any) -> list[dict[str, Any]]:
    block = {"type": "tool_use", "id": "c1", "name": "f", "input": tool_input}
    return [{"role": "assistant", "content": [{"type": "text", "text": "x"}, block]}]


def with_metadata(metadata: Any) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [], "metadata": metadata}]


class Point:
    x = 1


NOT_PLAIN = [
    pytest.param({"blob": b"\x00"}, ".blob", "bytes", id="bytes"),
    pytest.param({"blob": bytearray(b"x")}, ".blob", "bytearray", id="bytearray"),
    pytest.param({"tags": ["a", {"b"}]}, ".tags[1]", "set", id="set"),
    pytest.param({"tags": frozenset()}, ".tags", "frozenset", id="frozenset"),
    pytest.param({"p": Point()}, ".p", "Point", id="object"),
    pytest.param({"cb": print}, ".cb", "function", id="builtin-function"),
    pytest.param({"cb": lambda: 1}, ".cb", "function", id="lambda"),
    pytest.param({"cls": Point}, ".cls", "class", id="class"),
    pytest.param({"n": math.nan}, ".n", "nan", id="nan"),
    pytest.param({"n": [1.0, math.inf]}, ".n[1]", "inf", id="inf"),
    pytest.param({"n": -math.inf}, ".n", "-inf", id="-inf"),
    pytest.param({"n": decimal.Decimal(1)}, ".n", "Decimal", id="decimal"),
    pytest.param({"n": 1j}, ".n", "complex", id="complex"),
    pytest.param({"deep": {1: "one"}}, ".deep", "key 1 is not a string", id="int-key"),
    pytest.param({"deep": [{(1, 2): 0}]}, ".deep[0]", "key (1, 2) is not", id="tuple-key"),
    pytest.param({"odd key": [0, b""]}, "['odd key'][1]", "bytes", id="quoted-key"),
]


@pytest.mark.parametrize(("value", "where", "why"), NOT_PLAIN)
def test_not_plain_data_in_tool_input_is_refused_with_its_path(
    value: Any, where: str, why: str
) -> None:
    assert_invalid(
        lambda: validate_messages(call_with(value)),
        f"messages[0].content[1].input{where}",
        f"not plain data ({why}",
    )


@pytest.mark.parametrize(("value", "where", "why"), NOT_PLAIN)
def test_not_plain_data_in_metadata_is_refused_with_its_path(
    value: Any, where: str, why: str
) -> None:
    assert_invalid(
        lambda: validate_messages(with_metadata(value)),
        f"messages[0].metadata{where}",
        f"not plain data ({why}",
    )


def test_non_string_key_at_the_top_of_the_input_is_refused() -> None:
    assert_invalid(
        lambda: validate_messages(call_with({1: "x"})),
        "messages[0].content[1].input",
        "not plain data (key 1 is not a string)",
    )


def test_a_cycle_is_refused_at_the_place_it_closes() -> None:
    loop: dict[str, Any] = {"name": "loop"}
    loop["self"] = loop
    assert_invalid(
        lambda: validate_messages(with_metadata({"k": loop})),
        "messages[0].metadata.k.self",
        "not plain data (a cycle)",
    )


def test_a_list_holding_itself_is_refused_as_a_cycle() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    assert_invalid(
        lambda: validate_messages(call_with({"items": loop})),
        "messages[0].content[1].input.items[1]",
        "not plain data (a cycle)",
    )


def nested(containers: int, *, lists: bool = False) -> dict[str, Any]:
    """A JSON object that nests ``containers`` containers, itself included."""
    inner: Any = [] if lists else {}
    for _ in range(containers - 2):
        inner = [inner] if lists else {"a": inner}
    return {"a": inner}


@pytest.mark.parametrize("lists", [False, True])
def test_sixty_four_nested_containers_are_accepted(lists: bool) -> None:
    (message,) = validate_messages(call_with(nested(64, lists=lists)))
    assert thaw(message.content[1].input) == nested(64, lists=lists)
    (message,) = validate_messages(with_metadata(nested(64, lists=lists)))
    assert thaw(message.metadata) == nested(64, lists=lists)


@pytest.mark.parametrize("lists", [False, True])
def test_sixty_five_nested_containers_are_refused_at_the_sixty_fifth(lists: bool) -> None:
    where = ".a" + "[0]" * 63 if lists else ".a" * 64
    assert_invalid(
        lambda: validate_messages(call_with(nested(65, lists=lists))),
        f"messages[0].content[1].input{where}",
        "not plain data (more than 64 nested containers)",
    )
    assert_invalid(
        lambda: validate_messages(with_metadata(nested(65, lists=lists))),
        f"messages[0].metadata{where}",
        "not plain data (more than 64 nested containers)",
    )


def test_a_frozen_value_nested_again_still_counts_every_container() -> None:
    deepest = ToolUseBlock("c1", "f", nested(64)).input  # already frozen and checked
    assert_invalid(
        lambda: ToolUseBlock("c2", "f", {"wrapper": deepest}),
        "input.wrapper" + ".a" * 63,
        "more than 64 nested containers",
    )
    assert_invalid(
        lambda: Message("user", [], metadata={"wrapper": deepest}),
        "metadata.wrapper" + ".a" * 63,
        "more than 64 nested containers",
    )


def test_frozen_values_from_other_messages_are_reused_without_copying() -> None:
    first = ToolUseBlock("c1", "f", {"query": {"q": "x"}})
    assert ToolUseBlock("c2", "g", first.input).input is first.input
    message = Message("user", [], metadata=first.input)
    assert message.metadata is first.input


def test_json_scalars_lists_and_mappings_are_accepted() -> None:
    value = {
        "s": "é",
        "i": 10**18,
        "f": -0.5,
        "b": False,
        "n": None,
        "l": [1, [2, (3,)]],
        "m": OrderedDict(x=1),
        "": {},
    }
    (message,) = validate_messages(call_with(value))
    assert message.content[1].input == {**value, "l": (1, (2, (3,))), "m": {"x": 1}}


def test_freeze_json_names_paths_without_a_leading_dot() -> None:
    assert_invalid(lambda: freeze_json({"a": [b""]}), "a[0]", "not plain data (bytes)")
    assert_invalid(lambda: freeze_json([{"a": b""}]), "[0].a", "not plain data (bytes)")
    assert_invalid(lambda: freeze_json(b""), "", "not plain data (bytes)")
    assert_invalid(lambda: freeze_json({"a": b""}, "input"), "input.a")


def test_frozen_dict_built_from_not_plain_data_raises_invalid_message_error() -> None:
    assert_invalid(lambda: FrozenDict({1: 2}), "", "not plain data (key 1 is not a string)")
    assert_invalid(lambda: FrozenDict(blob=b""), "blob", "not plain data (bytes)")
    assert_invalid(lambda: FrozenDict(nested(65)), "a" + ".a" * 63, "more than 64")
