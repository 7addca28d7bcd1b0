"""Hostile input: every bad value gets InvalidMessageError with a path, nothing else.

Lone surrogates, subclasses of the JSON types whose methods raise or lie, and
values that expand to millions of nodes are put anywhere in otherwise valid
input; validation refuses them cleanly or copies them into exact built-in
types, so nothing the caller does afterwards shows through a message.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnkit import InvalidMessageError, Message, validate_blocks, validate_messages
from turnkit.messages import (
    FrozenDict,
    ImageBlock,
    JsonLimits,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
    get_json_limits,
    set_json_limits,
    thaw,
)
from turnkit.messages._json import freeze_json

from ._assertions import assert_invalid
from .strategies import wire_message_lists

SURROGATE = json.loads('"\\ud800"')


class Boom(Exception):
    """What the hostile methods raise."""


def _boom(*args: object, **kwargs: object) -> Any:
    raise Boom("caller code ran")


class HostileStr(str):
    __hash__ = __eq__ = __ne__ = isascii = encode = __str__ = __repr__ = _boom  # type: ignore[assignment]
    __iter__ = __len__ = __getitem__ = startswith = _boom  # type: ignore[assignment]


class HostileDict(dict):  # type: ignore[type-arg]
    items = keys = values = __iter__ = __len__ = __getitem__ = get = _boom  # type: ignore[assignment]
    __contains__ = __eq__ = __repr__ = _boom  # type: ignore[assignment]


class HostileList(list):  # type: ignore[type-arg]
    __iter__ = __len__ = __getitem__ = __eq__ = __repr__ = _boom  # type: ignore[assignment]


class HostileInt(int):
    __index__ = __int__ = __eq__ = __hash__ = __repr__ = __str__ = __lt__ = _boom  # type: ignore[assignment]
    __le__ = __gt__ = __ge__ = _boom  # type: ignore[assignment]


EXACT = (str, int, float, bool, type(None), tuple, FrozenDict)


def _places(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every position in a wire value: the path of keys and indexes to it."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield (*path, key)
            yield from _places(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield (*path, index)
            yield from _places(item, (*path, index))


def _replace(value: Any, path: tuple[Any, ...], make: Any) -> None:
    for step in path[:-1]:
        value = value[step]
    value[path[-1]] = make(value[path[-1]])


def _poisoned(original: Any) -> Any:
    if isinstance(original, str):
        return HostileStr(original)
    if isinstance(original, bool) or original is None:
        return HostileStr("x")
    if isinstance(original, int):
        return HostileInt(original)
    if isinstance(original, dict):
        return HostileDict(original)
    if isinstance(original, list):
        return HostileList(original)
    return original


def _only_exact_types(value: Any) -> None:
    """Everything reachable from a validated message is an exact built-in type."""
    if isinstance(value, Message):
        for block in value.content:
            _only_exact_types(block)
        for field in ("role", "type", "id", "metadata", "invocation_id"):
            _only_exact_types(getattr(value, field))
        return
    if hasattr(value, "__struct_fields__"):
        for field in value.__struct_fields__:
            _only_exact_types(getattr(value, field))
        return
    assert type(value) in EXACT, type(value)
    if type(value) is tuple:
        for item in value:
            _only_exact_types(item)
    elif type(value) is FrozenDict:
        for key, item in value.items():
            assert type(key) is str
            _only_exact_types(item)


@settings(max_examples=60, deadline=None)
@given(wire_message_lists(), st.data())
def test_a_hostile_subclass_anywhere_is_refused_or_copied(wire: list[Any], data: Any) -> None:
    places = list(_places(wire))
    if not places:
        return
    place = data.draw(st.sampled_from(places))
    _replace(wire, place, _poisoned)
    try:
        messages = validate_messages(wire)
    except InvalidMessageError as err:
        assert str(err).startswith("messages")
        return
    for message in messages:
        _only_exact_types(message)


@settings(max_examples=60, deadline=None)
@given(wire_message_lists(), st.data())
def test_a_lone_surrogate_anywhere_is_refused_with_its_path(wire: list[Any], data: Any) -> None:
    places = [p for p in _places(wire) if isinstance(_get(wire, p), str)]
    keys = [p for p in _places(wire) if isinstance(p[-1], str)]
    if not places and not keys:
        return
    as_key = bool(keys) and (not places or data.draw(st.booleans()))
    if as_key:
        place = data.draw(st.sampled_from(keys))
        parent = _get(wire, place[:-1])
        parent[place[-1] + SURROGATE] = parent.pop(place[-1])
    else:
        place = data.draw(st.sampled_from(places))
        where = data.draw(st.integers(0, len(_get(wire, place))))
        _replace(wire, place, lambda text: text[:where] + SURROGATE + text[where:])
    with pytest.raises(InvalidMessageError) as caught:
        validate_messages(wire)
    first = f"messages[{place[0]}]"
    assert caught.value.path.startswith(first), (caught.value.path, place)


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@settings(max_examples=30, deadline=None)
@given(wire_message_lists())
def test_every_validated_message_encodes_as_utf8_json(wire: list[Any]) -> None:
    for message in validate_messages(wire):
        json.dumps(message.to_dict(), ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize(
    ("build", "path"),
    [
        (lambda s: TextBlock(s), "text"),
        (lambda s: Message.user(s), "content[0].text"),
        (lambda s: Message.system("hi", id=s), "id"),
        (lambda s: ToolUseBlock(s, "f", {}), "id"),
        (lambda s: ToolUseBlock("c", "f", {"k": s}), "input.k"),
        (lambda s: ToolUseBlock("c", "f", {s: 1}), "input"),
        (lambda s: ToolResultBlock("c", s), "content"),
        (lambda s: UrlSource("https://a.example/" + s), "url"),
        (lambda s: Message("user", [], metadata={"a": [s]}), "metadata.a[0]"),
        (lambda s: Message.from_dict({"role": "user", "content": [], s: 1}), ""),
        (lambda s: Message.from_dict({"role": s, "content": []}), "role"),
    ],
)
def test_lone_surrogates_are_refused_at_validation(build: Any, path: str) -> None:
    with pytest.raises(InvalidMessageError) as caught:
        build("ab" + SURROGATE)
    assert caught.value.path.startswith(path)
    assert "surrogate" in str(caught.value) or "unknown" in str(caught.value)


def test_a_str_subclass_is_copied_so_later_changes_do_not_show() -> None:
    class Tagged(str):
        pass

    text = Tagged("hello")
    block = TextBlock(text)
    message = Message("user", [block], id=Tagged("m1"))
    text.secret = "set later"  # type: ignore[attr-defined]
    assert type(block.text) is str and type(message.id) is str
    assert not hasattr(block.text, "secret")


def test_hostile_objects_in_direct_construction_give_invalid_message_error() -> None:
    assert type(TextBlock(HostileStr("x")).text) is str
    assert type(Message(HostileStr("user"), []).role) is str
    value = ToolUseBlock("c", "f", HostileDict(k=HostileList([HostileInt(3)]))).input
    assert value == {"k": (3,)} and type(value["k"][0]) is int
    assert_invalid(lambda: Message("user", [], metadata={"k": object()}), "metadata.k")
    assert_invalid(lambda: Message(HostileStr("bot"), []), "role", "unknown role 'bot'")


# -- resource bombs ------------------------------------------------------------------


def test_shared_containers_expanding_to_millions_of_nodes_are_refused_cheaply() -> None:
    leaf = [0] * 1000
    middle = [leaf] * 1000
    bomb = {"x": [middle] * 1000}  # three small lists, a billion values written out
    tracemalloc.start()
    try:
        assert_invalid(
            lambda: ToolUseBlock("c", "f", bomb), "input.x[0][197]", "more than 200000 values"
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 * 1024 * 1024


def test_shared_frozen_objects_count_every_time_they_appear() -> None:
    frozen = ToolUseBlock("c", "f", {"k": list(range(1000))}).input
    bomb = {"a": [frozen] * 500}
    assert_invalid(lambda: Message("user", [], metadata=bomb), "metadata.a[199]", "200000 values")


def test_shared_strings_count_their_bytes_every_time() -> None:
    text = "x" * (1024 * 1024)
    assert_invalid(lambda: freeze_json({"a": [text] * 17}), "a", "16777216 bytes")


def test_limits_are_documented_defaults_and_configurable() -> None:
    assert get_json_limits() == JsonLimits(max_nodes=200_000, max_depth=64, max_bytes=16 << 20)
    previous = set_json_limits(JsonLimits(max_nodes=5, max_depth=3, max_bytes=10))
    try:
        assert_invalid(
            lambda: freeze_json(list(range(5))), "", "not plain data (more than 5 values)"
        )
        assert_invalid(lambda: freeze_json([[[[1]]]]), "[0][0][0]", "more than 3 nested")
        too_long = {"k": "0123456789"}
        assert_invalid(lambda: freeze_json(too_long), "", "not plain data (more than 10 bytes")
        assert freeze_json({"k": [1, 2]}) == {"k": (1, 2)}
    finally:
        set_json_limits(previous)
    with pytest.raises(ValueError, match="max_nodes"):
        JsonLimits(max_nodes=0)


@pytest.mark.parametrize(
    "number", [10**5000, 2**64, -(2**63) - 1], ids=["5001-digits", "2**64", "-2**63-1"]
)
def test_integers_no_provider_can_take_are_refused(number: int) -> None:
    err = assert_invalid(lambda: ToolUseBlock("c", "f", {"n": [number]}), "input.n[0]")
    assert "integer outside" in str(err)


def test_integers_in_the_64_bit_range_are_kept() -> None:
    value = ToolUseBlock("c", "f", {"n": [2**64 - 1, -(2**63)]}).input
    assert value == {"n": (2**64 - 1, -(2**63))}


# -- builders and paths ----------------------------------------------------------------


@pytest.mark.parametrize("url", [{"url": "https://a.example/x.png"}, 5, None, b"https://a/x"])
def test_append_image_url_block_with_a_non_str_is_a_clear_error(url: Any) -> None:
    assert_invalid(lambda: Message.user("hi").append_image_url_block(url), "url", "expected")


def test_builders_with_non_str_text_give_invalid_message_error() -> None:
    assert_invalid(lambda: Message.system(5), "content[0].text", "expected a string")  # type: ignore[arg-type]
    assert_invalid(lambda: Message.user("hi", id=5), "id", "expected a string")
    assert_invalid(lambda: ImageBlock({"type": "url", "url": 5}), "source.url")


@pytest.mark.parametrize(
    ("key", "shown"),
    [
        ("content[0].text", "messages[0]['content[0].text']"),
        ("a.b", "messages[0]['a.b']"),
        ("", "messages[0]['']"),
        ("extra", "messages[0].extra"),
    ],
)
def test_an_unknown_key_is_never_confusable_with_a_real_path(key: str, shown: str) -> None:
    wire = [{"role": "user", "content": [{"type": "text", "text": "x"}], key: 1}]
    assert_invalid(lambda: validate_messages(wire), shown, "unknown field")


def test_thaw_of_a_frozen_dict_is_plain_json() -> None:
    frozen = freeze_json({"a": [{"b": 1}]})
    assert json.dumps(thaw(frozen)) == '{"a": [{"b": 1}]}'


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://a.example:65536/x.png", "Port out of range"),
        ("http://a.example:99999999999/x.png", "Port"),
        ("http://a.example/x\x00.png", "control character"),
        ("http://a.example/x\x7f.png", "control character"),
        ("http://a.example\\@b.example/x.png", "backslash"),
        ("http://a..example/x.png", "not a valid host name"),
        ("http://-a.example/x.png", "not a valid host name"),
        ("http://" + "a" * 64 + ".example/x.png", "not a valid host name"),
        ("http://\u2603.net/x.png", "internationalized domain name"),
        ("http://[::zz]/x.png", "IPv6"),
        ("ftp://a.example/x.png", "scheme"),
        ("http:///x.png", "no host"),
    ],
)
def test_urls_no_http_client_can_use_are_refused_at_validation(url: str, problem: str) -> None:
    err = assert_invalid(lambda: UrlSource(url), "url", "not an absolute http(s) URL")
    assert problem in str(err)


@pytest.mark.parametrize(
    "url",
    ["http://b\u00fccher.example/x.png", "https://[::1]:8443/x.png", "http://a_b.example:80/x"],
)
def test_unusual_but_usable_urls_are_kept(url: str) -> None:
    assert UrlSource(url).url == url


class Disguised:
    """An object whose ``__class__`` raises: isinstance() would run its code."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # type: ignore[override]
        raise Boom("__class__ read")


@pytest.mark.parametrize(
    ("build", "path"),
    [
        (lambda: TextBlock(Disguised()), "text"),  # type: ignore[arg-type]
        (lambda: Message("user", [Disguised()]), "content[0]"),
        (lambda: Message(Disguised(), []), "role"),  # type: ignore[arg-type]
        (lambda: ToolUseBlock("c", "f", {"k": [Disguised()]}), "input.k[0]"),
        (lambda: Message.user(metadata=Disguised()), "metadata"),
        (lambda: Message.user().append_image_url_block(Disguised()), "url"),  # type: ignore[arg-type]
        (lambda: ImageBlock(Disguised()), "source"),  # type: ignore[arg-type]
    ],
)
def test_objects_are_classified_by_type_never_by_their_own_class_attribute(
    build: Any, path: str
) -> None:
    with pytest.raises(InvalidMessageError) as caught:
        build()
    assert caught.value.path == path


def test_messages_and_blocks_shared_many_times_over_are_refused_before_building() -> None:
    block = {"type": "text", "text": "x"}
    message = {"role": "user", "content": [block] * 1000}
    tracemalloc.start()
    try:
        assert_invalid(
            lambda: validate_messages([message] * 1000), "messages", "more than 200000 messages"
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5 * 1024 * 1024


def test_tool_result_parts_shared_many_times_over_are_counted_too() -> None:
    result = {"type": "tool_result", "tool_use_id": "c", "content": [{"type": "text", "text": ""}]}
    result["content"] = result["content"] * 1000
    wire = [{"role": "user", "content": [result] * 300}]
    assert_invalid(lambda: validate_messages(wire), "messages", "blocks and parts")
    assert_invalid(lambda: validate_blocks([result] * 300), "blocks", "blocks and parts")


def test_a_long_text_shared_by_many_blocks_counts_each_time() -> None:
    text = "x" * (1 << 20)
    wire = [{"role": "user", "content": [{"type": "text", "text": text}] * 17}]
    assert_invalid(lambda: validate_messages(wire), "messages", "characters of text")
    part = {"type": "text", "text": text}
    result = {"type": "tool_result", "tool_use_id": "c", "content": [part] * 17}
    assert_invalid(lambda: validate_blocks([result]), "blocks", "characters of text")
    assert len(validate_messages([{"role": "user", "content": [part] * 15}])[0].content) == 15


def test_one_part_repeated_a_million_times_stops_the_build_at_the_limit() -> None:
    part = {"type": "text", "text": "x"}
    wire = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c"}]}]
    wire[0]["content"][0]["content"] = [part] * 1_000_000  # one list: counted while built
    tracemalloc.start()
    try:
        assert_invalid(lambda: validate_messages(wire), "messages", "blocks and parts")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 * 1024 * 1024  # about max_nodes blocks were built, not a million
