"""Properties of validation and the pipeline, over generated input."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from turnkit import (
    InvalidMessageError,
    Message,
    ToolResultBlock,
    ToolUseBlock,
    normalize_tool_call_history,
    validate_blocks,
    validate_messages,
)

from .strategies import (
    anything,
    blocks,
    histories,
    message_lists,
    messages,
    shaped_dicts,
    wire_message_lists,
)

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(anything)
def test_any_value_validates_or_raises_invalid_message_error(value: Any) -> None:
    try:
        result = validate_messages(value)
    except InvalidMessageError as err:
        assert str(err).startswith(err.path)
        assert err.code == "INVALID_MESSAGE"
    else:
        assert isinstance(result, tuple)
        assert all(isinstance(message, Message) for message in result)


@FAST
@given(st.lists(anything, max_size=4))
def test_any_list_validates_or_raises_invalid_message_error(value: list[Any]) -> None:
    for check in (validate_messages, validate_blocks):
        with contextlib.suppress(InvalidMessageError):
            check(value)


@FAST
@given(shaped_dicts)
def test_any_mapping_builds_a_message_or_raises_invalid_message_error(value: Any) -> None:
    with contextlib.suppress(InvalidMessageError):
        Message.from_dict(value)
    with contextlib.suppress(InvalidMessageError):
        validate_messages([value])
    if {"role", "content"} <= value.keys() <= set(Message.__struct_fields__):
        with contextlib.suppress(InvalidMessageError):
            Message(**value)  # direct construction checks the same way


@FAST
@given(messages())
def test_wire_round_trip_gives_an_equal_message(message: Message) -> None:
    assert Message.from_dict(message.to_dict()) == message
    assert Message.from_dict(message.to_dict()).to_dict() == message.to_dict()
    assert hash(Message.from_dict(message.to_dict())) == hash(message)


@FAST
@given(message_lists)
def test_valid_lists_validate_to_themselves(items: list[Message]) -> None:
    assert validate_messages(items) == tuple(items)
    assert validate_messages([m.to_dict() for m in items]) == tuple(items)


@FAST
@given(st.lists(blocks, max_size=5, unique_by=lambda b: getattr(b, "id", id(b))))
def test_block_round_trip_through_validate_blocks(items: list[Any]) -> None:
    assert validate_blocks([b.to_dict() for b in items]) == tuple(items)


def call_ids(message: Message) -> list[str]:
    return [b.id for b in message.content if isinstance(b, ToolUseBlock)]


def check_paired(history: list[Message]) -> None:
    """Every call answered in the next message, results first in call order;
    no tool_result without a call in the assistant message right before."""
    for index, message in enumerate(history):
        if calls := call_ids(message):
            assert index + 1 < len(history)
            answer = history[index + 1]
            assert answer.role == "user"
            head = answer.content[: len(calls)]
            assert [getattr(b, "tool_use_id", None) for b in head] == calls
        results = [b for b in message.content if isinstance(b, ToolResultBlock)]
        if results:
            assert index > 0
            assert [b.tool_use_id for b in results] == call_ids(history[index - 1])
            assert message.content[: len(results)] == tuple(results)


@FAST
@given(histories())
def test_normalize_pairs_every_call_and_is_idempotent(history: list[Message]) -> None:
    before = [m.to_dict() for m in history]
    normalized = normalize_tool_call_history(history)
    assert [m.to_dict() for m in history] == before
    check_paired(normalized)
    assert normalize_tool_call_history(normalized) == normalized
    assert validate_messages(normalized) == tuple(normalized)


@FAST
@given(histories())
def test_normalize_never_loses_a_non_result_block(history: list[Message]) -> None:
    normalized = normalize_tool_call_history(history)

    def others(items: list[Message]) -> list[Any]:
        return [b for m in items for b in m.content if not isinstance(b, ToolResultBlock)]

    assert others(normalized) == others(history)


def mutate_everything(value: Any) -> None:
    """Change every dict and list in place, all the way down."""
    if isinstance(value, dict):
        for key in list(value):
            mutate_everything(value[key])
            if not isinstance(value[key], (dict, list)):
                value[key] = "mutated"
        value["added"] = ["mutated"]
    elif isinstance(value, list):
        for item in value:
            mutate_everything(item)
        value.append({"added": True})


@FAST
@given(wire_message_lists())
def test_mutating_the_input_after_validation_changes_nothing(wire: list[dict[str, Any]]) -> None:
    snapshot = copy.deepcopy(wire)
    validated = validate_messages(wire)
    dumped = [m.to_dict() for m in validated]
    mutate_everything(wire)
    assert validated == validate_messages(snapshot)
    assert [m.to_dict() for m in validated] == dumped
