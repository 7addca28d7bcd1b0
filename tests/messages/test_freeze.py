"""Objects are immutable, deeply; the caller's data is never aliased."""

from __future__ import annotations

import contextlib
import copy
import json
import pickle
from collections.abc import Mapping
from typing import Any

import pytest

from turnkit import Message, TextBlock, ToolUseBlock, validate_messages
from turnkit.messages import FrozenDict, thaw
from turnkit.messages._json import freeze_json

PNG = {"type": "base64", "media_type": "image/png", "data": "aGk="}


def wire() -> list[dict[str, Any]]:
    return [
        {
            "role": "user",
            "content": [{"type": "text", "text": "q"}, {"type": "image", "source": dict(PNG)}],
            "metadata": {"tags": ["a", "b"], "user": {"id": 7}},
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "c1", "name": "f", "input": {"q": {"terms": ["x"]}}}
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c1",
                    "content": [{"type": "image", "source": dict(PNG)}],
                }
            ],
        },
    ]


def sample() -> Message:
    return validate_messages(wire())[1]


@pytest.mark.parametrize(
    ("target", "field"),
    [
        (lambda: Message.user("a"), "role"),
        (lambda: Message.user("a"), "content"),
        (lambda: Message.user("a"), "metadata"),
        (lambda: TextBlock("a"), "text"),
        (lambda: sample().content[0], "input"),
        (lambda: validate_messages(wire())[0].content[1].source, "data"),
        (lambda: validate_messages(wire())[0].content[1], "source"),
    ],
)
def test_setting_an_attribute_raises(target: Any, field: str) -> None:
    obj = target()
    with pytest.raises(AttributeError):
        setattr(obj, field, "changed")
    with pytest.raises((AttributeError, TypeError)):
        object.__setattr__(obj, field, "changed")


def test_objects_take_no_new_attributes() -> None:
    with pytest.raises(AttributeError):
        Message.user("a").extra = 1  # type: ignore[attr-defined]


def test_content_and_json_arrays_are_tuples() -> None:
    message = validate_messages(wire())[0]
    assert type(message.content) is tuple
    assert message.metadata["tags"] == ("a", "b")


MUTATIONS = [
    pytest.param(lambda d: d.__setitem__("k", 1), id="setitem"),
    pytest.param(lambda d: d.__delitem__("q"), id="delitem"),
    pytest.param(lambda d: d.clear(), id="clear"),
    pytest.param(lambda d: d.pop("q"), id="pop"),
    pytest.param(lambda d: d.pop("missing", None), id="pop-default"),
    pytest.param(lambda d: d.popitem(), id="popitem"),
    pytest.param(lambda d: d.setdefault("k", 1), id="setdefault"),
    pytest.param(lambda d: d.setdefault("q"), id="setdefault-existing"),
    pytest.param(lambda d: d.update(k=1), id="update"),
    pytest.param(lambda d: d.update(), id="update-nothing"),
    pytest.param(lambda d: d.__ior__({"k": 1}), id="ior"),
]


@pytest.mark.parametrize("mutate", MUTATIONS)
def test_frozen_dict_refuses_every_mutating_method(mutate: Any) -> None:
    tool_input = sample().content[0].input
    with pytest.raises(TypeError, match="immutable"):
        mutate(tool_input)
    with pytest.raises(TypeError, match="immutable"):
        mutate(tool_input["q"])  # nested objects too (no key "q" there: still refused)
    assert tool_input == {"q": {"terms": ("x",)}}


def test_in_place_or_on_a_frozen_dict_is_refused() -> None:
    tool_input = sample().content[0].input
    alias = tool_input
    with pytest.raises(TypeError):
        alias |= {"k": 1}
    assert tool_input == {"q": {"terms": ("x",)}}


def test_frozen_dict_is_a_read_only_mapping_that_thaws_for_json() -> None:
    tool_input = sample().content[0].input
    assert isinstance(tool_input, Mapping) and not isinstance(tool_input, dict)
    assert json.loads(json.dumps(thaw(tool_input))) == {"q": {"terms": ["x"]}}
    assert tool_input == {"q": {"terms": ("x",)}}
    assert repr(FrozenDict(a=1)) == "FrozenDict({'a': 1})"


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda d: dict.__setitem__(d, "k", 1), id="dict.__setitem__"),
        pytest.param(lambda d: dict.update(d, k=1), id="dict.update"),
        pytest.param(lambda d: dict.__init__(d, k=1), id="dict.__init__"),
        pytest.param(lambda d: dict.clear(d), id="dict.clear"),
        pytest.param(lambda d: d.__init__(k=1), id="__init__"),
        pytest.param(lambda d: object.__setattr__(d, "k", 1), id="new-attribute"),
        pytest.param(lambda d: setattr(d, "_data", {}), id="setattr"),
        pytest.param(lambda d: d._data.__setitem__("k", 1), id="private-data"),
        pytest.param(lambda d: d.keys().mapping.__setitem__("k", 1), id="keys-view-mapping"),
    ],
)
def test_frozen_dict_cannot_be_changed_through_dict_methods(mutate: Any) -> None:
    tool_input = sample().content[0].input
    with contextlib.suppress(TypeError, AttributeError):
        mutate(tool_input)
    assert tool_input == {"q": {"terms": ("x",)}}
    assert dict(tool_input) == {"q": {"terms": ("x",)}}
    assert list(tool_input) == ["q"]


def test_frozen_dict_cannot_be_subclassed() -> None:
    with pytest.raises(TypeError, match="subclassed"):

        class Loose(FrozenDict):  # type: ignore[misc]
            pass


def test_frozen_dict_builds_from_anything_dict_takes_and_freezes_it() -> None:
    frozen = FrozenDict([("a", [1, {"b": [2]}])], c=3)
    assert frozen == {"a": (1, {"b": (2,)}), "c": 3}
    assert isinstance(frozen["a"][1], FrozenDict)
    assert hash(frozen) == hash(FrozenDict(c=3, a=[1, {"b": [2]}]))


def test_copying_a_frozen_dict_or_merging_gives_a_mutable_plain_dict() -> None:
    frozen = FrozenDict(a=1)
    for mutable in (frozen.copy(), frozen | {"b": 2}, dict(frozen)):
        assert type(mutable) is dict
        mutable["z"] = 0
    assert frozen == {"a": 1}


def test_thaw_gives_a_plain_mutable_deep_copy() -> None:
    frozen = freeze_json({"a": [1, {"b": (2, 3)}], "c": "x"})
    thawed = thaw(frozen)
    assert thawed == {"a": [1, {"b": [2, 3]}], "c": "x"}
    assert type(thawed) is dict and type(thawed["a"]) is list and type(thawed["a"][1]) is dict
    thawed["a"][1]["b"].append(4)
    assert frozen == {"a": (1, {"b": (2, 3)}), "c": "x"}


def test_to_dict_gives_a_mutable_copy_that_does_not_touch_the_message() -> None:
    message = validate_messages(wire())[0]
    before = message.to_dict()
    dumped = message.to_dict()
    dumped["content"].append({"type": "text", "text": "x"})
    dumped["content"][1]["source"]["data"] = "changed"
    dumped["metadata"]["tags"].append("c")
    dumped["metadata"]["user"]["id"] = 8
    assert message.to_dict() == before
    assert dumped != before


def test_mutating_the_callers_data_after_validation_changes_nothing() -> None:
    data = wire()
    messages = validate_messages(data)
    expected = [m.to_dict() for m in messages]
    data[0]["content"][1]["source"]["data"] = "changed"
    data[0]["content"].append({"type": "text", "text": "late"})
    data[0]["metadata"]["tags"].append("c")
    data[0]["metadata"]["user"]["id"] = 8
    data[1]["content"][0]["input"]["q"]["terms"].append("y")
    data[1]["content"][0]["input"]["q"] = None
    data[2]["content"][0]["content"][0]["source"]["media_type"] = "image/gif"
    data.append({"role": "user", "content": []})
    assert [m.to_dict() for m in messages] == expected
    assert messages == validate_messages(wire())


def test_mutating_the_callers_data_after_direct_construction_changes_nothing() -> None:
    tool_input = {"q": {"terms": ["x"]}}
    source = dict(PNG)
    metadata = {"tags": ["a"]}
    block = ToolUseBlock("c1", "f", tool_input)
    message = Message("user", [{"type": "image", "source": source}], metadata=metadata)
    tool_input["q"]["terms"].append("y")
    source["data"] = "YWJj"
    metadata["tags"].append("b")
    assert block.input == {"q": {"terms": ("x",)}}
    assert message.content[0].source.data == "aGk="
    assert message.metadata == {"tags": ("a",)}


def test_deepcopy_and_copy_of_messages_are_equal() -> None:
    messages = validate_messages(wire())
    assert copy.deepcopy(messages) == messages
    assert copy.copy(messages[1]) == messages[1]


def test_pickled_messages_come_back_equal_and_still_frozen() -> None:
    messages = validate_messages(wire())
    restored = pickle.loads(pickle.dumps(messages))
    assert restored == messages
    with pytest.raises(TypeError):
        restored[1].content[0].input["k"] = 1
    with pytest.raises(TypeError):
        restored[0].metadata["user"]["id"] = 8
    assert pickle.loads(pickle.dumps(FrozenDict(a=[1]))) == FrozenDict(a=[1])


def test_a_frozen_dict_copy_is_itself() -> None:
    frozen = FrozenDict(a={"b": 1})
    assert copy.copy(frozen) is frozen
    assert copy.deepcopy(frozen) is frozen
