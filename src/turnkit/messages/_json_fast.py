"""Freezing a plain JSON object in C, when it can be shown plain cheaply.

:func:`turnkit.messages._json.freeze_object` walks the caller's value in
Python, counting every value against the limits; for a tool input that is
about 140 ns a value. Most values are plain already (a model's JSON, parsed),
and for those three C passes prove everything the walk would check:

1. ``marshal.dumps`` takes exact built-in types only (``dict``, ``list``,
   ``str``, ``int``, ``float``, ``bool``, ``None``, and a few that the next
   passes refuse: ``tuple`` is kept as an array, ``bytes``...), never a
   subclass or another object, so no caller code runs in the passes after
   it; it writes an object shared within the value once and marks it, so a
   value whose containers are shared (which would expand when encoded), or
   that holds a set (which encoding would make a list), shows in its output
   (:data:`_MARKS`);
2. msgpack encoding refuses lone surrogates and integers outside
   -2**63..2**64-1, and its length bounds both the values (each takes a
   byte at least) and the UTF-8 bytes of all strings, keys included;
3. msgpack decoding into a JSON type of at most ``max_depth`` (and at most
   :data:`FAST_DEPTH`) nested containers refuses non-string keys, bytes,
   NaN and infinities, and deeper values.

Anything refused, or anything past what the length shows within the limits,
goes to the Python walk, which gives the exact error. What passes is kept as
its msgpack bytes in a :class:`FrozenDict` whose items are built on first
use (:func:`materialize`); :func:`plain_copy` thaws it in C.

:func:`fast_freeze_many` runs the same passes over a batch of tool inputs
at once (one ``marshal`` call, one decode), for ``validate_messages``.
"""

from __future__ import annotations

from functools import cache
from marshal import dumps as _marshal
from typing import Annotated, Any, Union

import msgspec

from turnkit.messages._json import FrozenDict, _new, _proxy, _set_data, _set_raw
from turnkit.messages._limits import JsonLimits

__all__ = [
    "FAST_DEPTH",
    "FAST_MARSHAL_BYTES",
    "fast_freeze",
    "fast_freeze_many",
    "materialize",
    "plain_copy",
]

FAST_DEPTH = 8
"""The most nested containers the C path takes; deeper values are walked.

The decoding type has two branches per level (arrays and objects), so its
size doubles with each level: eight is 256 type nodes, built once."""

FAST_MARSHAL_BYTES = 8192
"""The largest value (its ``marshal`` size) the C path takes.

``marshal`` writes a value shared within the value once, and a reference
each time after; encoding writes it out every time. Containers shared are
sent to the walk (below); what a shared string can still add to the
encoding is then at most (8192 / 5 references) x 8192 bytes, 13 MB."""

_MARKS = b"\xdb\xfb\xa8\xa9\xbc\xbe<>"
"""Bytes that send a value to the walk when ``marshal`` writes them past the
outermost dict (which the caller holds, so it may be marked): a list, dict,
tuple or set marked as referenced more than once (its type code with the
0x80 flag), which may be shared within the value and would expand when
encoded, and the type codes of sets, which encoding would turn into lists.
The same bytes inside text or numbers send a value to the walk too, which is
slower, never wrong."""
_NOT_MARKS = bytes(sorted(set(range(256)) - set(_MARKS)))

_FINITE = Annotated[float, msgspec.Meta(ge=-1.7976931348623157e308, le=1.7976931348623157e308)]
_encode = msgspec.msgpack.Encoder().encode
_decode_plain = msgspec.msgpack.Decoder().decode


@cache
def _json_type(depth: int, arrays: Any) -> Any:
    """A JSON value of at most ``depth`` nested containers, arrays as ``arrays``."""
    if depth == 0:
        return Union[str, int, _FINITE, bool, None]  # noqa: UP007 (a runtime type for msgspec)
    inner = _json_type(depth - 1, arrays)
    array = list[inner] if arrays is list else tuple[inner, ...]  # type: ignore[valid-type]
    return Union[str, int, _FINITE, bool, None, array, dict[str, inner]]  # type: ignore[valid-type]  # noqa: UP007


@cache
def _decoder(depth: int, arrays: Any) -> Any:
    return msgspec.msgpack.Decoder(_json_type(depth, arrays)).decode


class _Bounds:
    """What the C path allows under one ``JsonLimits``: its encoded length and decoder."""

    __slots__ = ("decode", "depth", "limits", "max_length")

    def __init__(self, limits: JsonLimits) -> None:
        self.limits = limits
        self.max_length = min(limits.max_nodes, limits.max_bytes)
        self.depth = min(limits.max_depth, FAST_DEPTH)
        self.decode = _decoder(self.depth, list)


_bounds = _Bounds(JsonLimits())


def _bounds_for(limits: JsonLimits) -> _Bounds:
    global _bounds
    bounds = _bounds
    if bounds.limits is not limits:
        bounds = _bounds = _Bounds(limits)
    return bounds


def fast_freeze(value: dict[Any, Any], limits: JsonLimits) -> FrozenDict | None:
    """``value`` (an exact dict) frozen, or None when the Python walk must decide."""
    try:
        built_ins = _marshal(value)
    except Exception:  # not built-in types only, or too deep
        return None
    if len(built_ins) > FAST_MARSHAL_BYTES:
        return None
    marks = built_ins.translate(None, _NOT_MARKS)
    if marks and marks != built_ins[:1]:
        return None  # perhaps a shared container, or a set
    try:
        data = _encode(value)
    except Exception:  # lone surrogates, integers no provider can take
        return None
    bounds = _bounds_for(limits)
    if len(data) > bounds.max_length:
        return None
    try:
        bounds.decode(data)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None
    frozen: FrozenDict = _new(FrozenDict)
    _set_raw(frozen, data)
    return frozen


def materialize(frozen: FrozenDict, data: bytes) -> Any:
    """The read-only items of a frozen object kept as ``data`` (set on it, and returned)."""
    items = _proxy({key: _frozen(item) for key, item in _decoder(FAST_DEPTH, tuple)(data).items()})
    _set_data(frozen, items)
    return items


def _frozen(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        result = _new(FrozenDict)
        _set_data(result, _proxy({key: _frozen(item) for key, item in value.items()}))
        return result
    if kind is tuple and value:
        return tuple([_frozen(item) for item in value])
    return value


def plain_copy(data: bytes) -> Any:
    """A plain, mutable deep copy of the frozen object kept as ``data``."""
    return _decode_plain(data)


_BATCH = 32
"""Tool inputs proven plain together, with one ``marshal`` call and one
decode: most of the C path's cost per input is the set-up of each call."""


def fast_freeze_many(values: list[dict[Any, Any]], limits: JsonLimits) -> dict[int, FrozenDict]:
    """The ``values`` that the C path proves plain, frozen: ``{id(value): frozen}``
    (the caller keeps ``values`` alive while it looks them up, so no id is reused).

    ``values`` are exact dicts, each held by one container alone (its block:
    none is shared with, or nested in, another value), so in a batch's
    ``marshal`` output each shows as one marked dict and any other mark is a
    container shared within a value (see :data:`_MARKS`). What is not taken,
    or whose batch fails a check, is left out: the caller freezes it alone
    (:func:`fast_freeze`, then the walk), which names errors.
    """
    found: dict[int, FrozenDict] = {}
    for start in range(0, len(values), _BATCH):
        batch = values[start : start + _BATCH]
        for value, frozen in zip(batch, _freeze_batch(batch, limits), strict=False):
            found[id(value)] = frozen  # all of the batch, or nothing
    return found


def _freeze_batch(batch: list[dict[Any, Any]], limits: JsonLimits) -> list[FrozenDict]:
    """``batch`` frozen, or nothing when any of it needs the one-by-one path."""
    try:
        built_ins = _marshal(batch)
    except Exception:
        return []
    if len(built_ins) > FAST_MARSHAL_BYTES:
        return []
    if built_ins[1:].translate(None, _NOT_MARKS) != _DICT_MARK * len(batch):
        return []
    bounds = _bounds_for(limits)
    parts = []
    for value in batch:
        try:
            data = _encode(value)
        except Exception:
            return []
        if len(data) > bounds.max_length:
            return []
        parts.append(data)
    try:
        _array_decoder(bounds.depth)(_array_header(len(parts)) + b"".join(parts))
    except (msgspec.ValidationError, msgspec.DecodeError):
        return []
    frozen = []
    for data in parts:
        item: FrozenDict = _new(FrozenDict)
        _set_raw(item, data)
        frozen.append(item)
    return frozen


_DICT_MARK = b"\xfb"  # a dict referenced more than once: each value, held by its block


def _array_header(length: int) -> bytes:
    return bytes([0x90 | length]) if length < 16 else b"\xdc" + length.to_bytes(2, "big")


@cache
def _array_decoder(depth: int) -> Any:
    return msgspec.msgpack.Decoder(list[_json_type(depth, list)]).decode  # type: ignore[valid-type]
