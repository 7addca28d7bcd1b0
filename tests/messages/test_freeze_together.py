"""Tool inputs frozen together give what freezing them one by one gives.

``validate_messages`` proves the tool inputs of a list plain in batches (see
``turnkit.messages._json_fast.fast_freeze_many``); an input left out, or in a
batch that fails a check, is frozen by its block as before. Either way the
caller sees one behaviour: the same messages, or the same error.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnkit import InvalidMessageError, validate_messages
from turnkit.messages import FrozenDict, thaw
from turnkit.messages import validate as validate_module

from .strategies import json_objects
from .test_freeze_fast_path import values


def outcome(history: list[dict[str, Any]]) -> Any:
    try:
        messages = validate_messages(history)
    except InvalidMessageError as err:
        return ("error", str(err))
    inputs = [b.input for m in messages for b in m.content if b.type == "tool_use"]
    return ("valid", messages, [thaw(value) for value in inputs])


def one_by_one(history: list[dict[str, Any]]) -> Any:
    real = validate_module._inputs_frozen
    validate_module._inputs_frozen = lambda inputs, limits: {}  # type: ignore[assignment]
    try:
        return outcome(history)
    finally:
        validate_module._inputs_frozen = real  # type: ignore[assignment]


def calls(inputs: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": f"t{index}", "name": "search", "input": value},
            ],
        }
        for index, value in enumerate(inputs)
    ]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.dictionaries(st.text(max_size=6), values, max_size=4), max_size=40))
def test_inputs_frozen_together_give_what_one_by_one_gives(inputs: list[dict[str, Any]]) -> None:
    history = calls(copy.deepcopy(inputs))  # each input held by its block only, as parsed
    together, alone = outcome(history), one_by_one(history)
    assert together == alone
    if together[0] == "valid":
        for message in together[1]:
            assert type(message.content[1].input) is FrozenDict


@settings(max_examples=200, deadline=None)
@given(st.lists(json_objects, min_size=2, max_size=40))
def test_plain_inputs_frozen_together_read_as_one_by_one(inputs: list[dict[str, Any]]) -> None:
    history = calls(copy.deepcopy(inputs))
    together, alone = outcome(history), one_by_one(history)
    assert together == alone and together[0] == "valid"
    assert together[2] == inputs


def test_plain_inputs_are_frozen_together() -> None:
    inputs = [{"q": f"order {i}", "f": {"s": ["open"], "n": 20}} for i in range(70)]
    history = calls(copy.deepcopy(inputs))
    found: list[int] = []
    real = validate_module._inputs_frozen

    def spy(values: list[object], limits: Any) -> dict[int, Any]:
        frozen = real(values, limits)
        found.append(len(frozen))
        return frozen

    validate_module._inputs_frozen = spy  # type: ignore[assignment]
    try:
        messages = validate_messages(history)
    finally:
        validate_module._inputs_frozen = real  # type: ignore[assignment]
    assert found == [70]
    assert [thaw(m.content[1].input) for m in messages] == inputs


def test_an_input_shared_by_two_blocks_or_nested_in_another_is_frozen_alone() -> None:
    shared = {"a": [1, 2]}
    history = calls([shared, shared, {"inner": shared}, {"x": "<>"}, {"y": 1}, {"z": 2}])
    expected = [shared, shared, {"inner": shared}, {"x": "<>"}, {"y": 1}, {"z": 2}]
    assert outcome(history)[2] == expected


def test_inputs_nesting_each_other_are_never_expanded() -> None:
    # Each input holds the next twice: written out, the first would have 2**40 values.
    chain: list[dict[str, Any]] = [{"end": True}]
    for _ in range(40):
        chain.insert(0, {"a": chain[0], "b": chain[0]})
    start = time.perf_counter()
    with pytest.raises(InvalidMessageError, match="more than 200000 values"):
        validate_messages(calls(chain))
    assert time.perf_counter() - start < 5


def test_a_bad_input_after_good_ones_names_its_place() -> None:
    inputs: list[Any] = [{"n": i} for i in range(40)] + [{"bad": {1: 2}}]
    with pytest.raises(InvalidMessageError) as err:
        validate_messages(calls(inputs))
    assert str(err.value).startswith("messages[40].content[1].input.bad")
