"""Tool inputs frozen in C give what the Python walk gives, error for error.

``freeze_object`` takes a C path for values it can show plain cheaply (see
``turnkit.messages._json_fast``) and the walk for the rest; whichever runs,
the caller sees one behaviour: the same frozen value, or the same error.
"""

from __future__ import annotations

import dataclasses
import decimal
import enum
import math
import tracemalloc
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from turnkit import InvalidMessageError
from turnkit.messages import FrozenDict, JsonLimits, set_json_limits, thaw
from turnkit.messages._json import freeze_json, freeze_object


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


@dataclasses.dataclass
class Point:
    x: int


def outcome(freeze: Any, value: Any) -> Any:
    try:
        frozen = freeze(value, "input")
    except InvalidMessageError as err:
        return ("error", str(err))
    return ("frozen", frozen, thaw(frozen))


def exact(value: Any) -> bool:
    kind = type(value)
    if kind is FrozenDict:
        return all(type(key) is str and exact(item) for key, item in value.items())
    if kind is tuple:
        return all(exact(item) for item in value)
    return kind in (str, int, float, bool, type(None))


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("<>\udb80é")),
    st.sampled_from([b"x", Color.RED, Level.HIGH, decimal.Decimal("1.5"), Point(1), 1j]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.frozensets(st.integers(), max_size=2),
        st.dictionaries(st.text(max_size=5), inner, max_size=4),
        st.dictionaries(st.integers(), inner, min_size=1, max_size=2),
    ),
    max_leaves=30,
)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(st.text(max_size=8), values, max_size=5))
def test_freezing_an_object_gives_what_the_walk_gives(value: dict[str, Any]) -> None:
    fast, walked = outcome(freeze_object, value), outcome(freeze_json, value)
    if fast[0] == "error" or walked[0] == "error":
        assert fast == walked
        return
    assert fast[1] == walked[1] and fast[2] == walked[2]
    assert exact(fast[1]) and list(fast[1]) == list(walked[1])


def test_an_object_frozen_in_c_reads_like_one_walked() -> None:
    value = {"q": "x", "f": {"s": ["a", "b"], "n": 20}, "o": [{"d": True}, {"d": None}]}
    frozen = freeze_object(value, "input")
    assert thaw(frozen) == value and thaw(frozen) is not value
    assert frozen == {"q": "x", "f": {"s": ("a", "b"), "n": 20}, "o": ({"d": True}, {"d": None})}
    assert type(frozen["f"]) is FrozenDict and type(frozen["o"]) is tuple
    assert exact(frozen) and hash(frozen) == hash(freeze_json(value))
    value["f"]["s"].append("later")  # the caller's value changes afterwards...
    assert frozen["f"]["s"] == ("a", "b")  # ...the frozen one does not


def test_an_unread_frozen_object_thaws_to_a_new_plain_copy() -> None:
    value = {"a": [1, {"b": 2.5}], "c": "é"}
    frozen = freeze_object(value, "input")
    copy = thaw(frozen)
    assert copy == value and copy is not value and copy["a"] is not value["a"]
    copy["a"].append(3)
    assert thaw(frozen) == value


def test_deep_values_past_the_c_path_are_walked_to_the_same_limit() -> None:
    value: dict[str, Any] = {}
    inner = value
    for _ in range(63):
        inner["x"] = {}
        inner = inner["x"]
    assert type(freeze_object(value, "input")) is FrozenDict  # 64 containers: accepted
    inner["x"] = {}
    try:
        freeze_object(value, "input")
    except InvalidMessageError as err:
        assert "more than 64 nested containers" in str(err)
    else:
        raise AssertionError("65 nested containers were accepted")


def test_lower_limits_apply_on_the_c_path_too() -> None:
    previous = set_json_limits(JsonLimits(max_depth=2, max_nodes=5, max_bytes=8))
    try:
        for value, problem in [
            ({"a": {"b": {}}}, "more than 2 nested containers"),
            ({"a": [1, 2, 3, 4, 5]}, "more than 5 values"),
            ({"a": "123456789"}, "more than 8 bytes of text"),
        ]:
            assert outcome(freeze_object, value) == outcome(freeze_json, value)
            assert problem in outcome(freeze_object, value)[1]
    finally:
        set_json_limits(previous)


def test_a_string_shared_within_an_input_costs_no_more_memory_than_the_walk_allows() -> None:
    text = "x" * 4000
    value = {"many": [text] * 800}  # marshal writes it once: about 8 KB
    tracemalloc.start()
    try:
        frozen = freeze_object(value, "input")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(frozen["many"]) == 800 and peak < 40 * 1024 * 1024


def test_nan_in_a_nested_list_is_refused_with_its_path() -> None:
    try:
        freeze_object({"a": [1, math.nan]}, "input")
    except InvalidMessageError as err:
        assert str(err).startswith("input.a[1]") and "nan" in str(err)
    else:
        raise AssertionError("NaN was accepted")
