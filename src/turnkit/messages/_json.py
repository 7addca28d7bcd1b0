"""Deeply frozen JSON values, within size limits.

Objects become :class:`FrozenDict`, arrays become tuples, scalars stay as they
are. Freezing copies containers only (O(structure)); exact ``str`` objects are
shared, never copied, which is what makes a defensive copy of a message cheap
whatever the size of the data inside it.

The caller's data is read without running the caller's code: exact built-in
types are taken as they are, subclasses of dict, list, tuple, str, int and
float are read through the built-in type's own methods and copied into it, and
anything else is refused. Every value is bounded (:class:`JsonLimits`), so a
value whose containers are shared many times over cannot expand into millions
of nodes downstream.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, NoReturn

from turnkit.errors import InvalidMessageError
from turnkit.messages._limits import MAX_INT, MIN_INT, JsonLimits, get_json_limits

__all__ = ["FrozenDict", "freeze_json", "thaw"]


class FrozenDict(Mapping[str, Any]):
    """A read-only JSON object: a :class:`~collections.abc.Mapping`, not a dict.

    It is not a ``dict`` subclass, so no ``dict`` method can change it
    (``dict.__setitem__(fd, ...)`` raises ``TypeError``). Values inside are
    frozen too. Compares equal to a dict with the same items; ``dict(fd)``,
    ``fd.copy()`` and ``fd | other`` give plain dicts, and :func:`thaw` a
    plain, mutable deep copy (what ``json.dumps`` takes).
    """

    __slots__ = ("_data", "_hash", "_raw", "_size")

    _data: MappingProxyType[str, Any]  # read-only: its dict is reachable from nowhere else
    _raw: bytes  # msgpack of the items, when frozen in C: _data is built on first use
    _size: tuple[int, int, int]  # nodes, bytes, height: what reusing it elsewhere adds

    def __new__(cls, *args: Any, **kwargs: Any) -> FrozenDict:
        try:
            pairs = dict(*args, **kwargs)
        except Exception as err:
            raise InvalidMessageError("", f"not plain data ({_error_name(err)})") from None
        return freeze_json(pairs)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        """Only reached for a slot not set: ``_data`` of an object frozen in C."""
        if name == "_data":
            return _materialize(self, _get_raw(self))
        raise AttributeError(name)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        raise TypeError("FrozenDict cannot be subclassed")

    def __setattr__(self, name: str, value: object) -> None:
        raise TypeError("FrozenDict is immutable; use turnkit.messages.thaw() for a mutable copy")

    __delattr__ = __setattr__  # type: ignore[assignment]

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("FrozenDict is immutable; use turnkit.messages.thaw() for a mutable copy")

    # What a dict would mutate with: a clear TypeError, not an AttributeError.
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def keys(self):  # type: ignore[no-untyped-def]
        return self._data.keys()

    def values(self):  # type: ignore[no-untyped-def]
        return self._data.values()

    def items(self):  # type: ignore[no-untyped-def]
        return self._data.items()

    def copy(self) -> dict[str, Any]:
        """A plain dict with the same (frozen) values."""
        return dict(self._data)

    def __or__(self, other: object) -> dict[str, Any]:
        if not isinstance(other, Mapping):
            return NotImplemented
        return {**self._data, **other}

    def __ror__(self, other: object) -> dict[str, Any]:
        if not isinstance(other, Mapping):
            return NotImplemented
        return {**other, **self._data}

    def __eq__(self, other: object) -> bool:
        if type(other) is FrozenDict:
            return self._data == other._data
        if isinstance(other, dict):
            return dict(self._data) == other if type(other) is not dict else self._data == other
        return NotImplemented

    def __hash__(self) -> int:
        try:
            return self._hash  # type: ignore[no-any-return]
        except AttributeError:
            value = hash(frozenset(self._data.items()))
            object.__setattr__(self, "_hash", value)
            return value

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[object, tuple[dict[str, Any]]]:
        return (_from_pairs, (thaw(self),))

    def __repr__(self) -> str:
        return f"FrozenDict({dict(self._data)!r})"


def _from_pairs(pairs: dict[str, Any]) -> FrozenDict:
    return FrozenDict(pairs)


def _size_of(value: FrozenDict) -> tuple[int, int, int]:
    """(nodes, bytes, height) of a frozen object, measured once, then kept."""
    try:
        return value._size
    except AttributeError:
        pass
    nodes, size, height = 1, 0, 1
    for key, item in value._data.items():
        size += len(key) if key.isascii() else len(key.encode())
        inner = _measure(item)
        nodes += inner[0]
        size += inner[1]
        height = max(height, inner[2] + 1)
    found = (nodes, size, height)
    _set(value, "_size", found)
    return found


def _measure(value: Any) -> tuple[int, int, int]:
    kind = type(value)
    if kind is FrozenDict:
        return _size_of(value)
    if kind is tuple:
        nodes, size, height = 1, 0, 1
        for item in value:
            inner = _measure(item)
            nodes += inner[0]
            size += inner[1]
            height = max(height, inner[2] + 1)
        return nodes, size, height
    if kind is str:
        return 1, len(value) if value.isascii() else len(value.encode()), 0
    return 1, 0, 0


_new = object.__new__
_set = object.__setattr__
_set_data = FrozenDict._data.__set__  # type: ignore[attr-defined]
_get_data = FrozenDict._data.__get__  # type: ignore[attr-defined]
_set_raw = FrozenDict._raw.__set__  # type: ignore[attr-defined]
_get_raw = FrozenDict._raw.__get__  # type: ignore[attr-defined]
_proxy = MappingProxyType
_dict_len = dict.__len__
_dict_items = dict.items


class _NotPlain(Exception):
    """Raised inside the walk; turned into InvalidMessageError at the top."""

    def __init__(self, why: str) -> None:
        self.why = why
        self.steps: list[str] = []


class _Walk:
    """One freezing walk: counts nodes and bytes against the limits.

    What is left of each limit is kept (``nodes_left``, ``bytes_left``) and a
    container gets the depth still allowed below it, so each check is one
    subtraction and one comparison. A container counts its children as
    nodes when it is entered (the outermost value is counted when the walk
    starts). Bytes of a container's own strings are taken off when it is
    done: the strings exist already, so the overshoot costs no memory.
    """

    __slots__ = ("bytes_left", "limits", "nodes_left")

    def __init__(self, limits: JsonLimits) -> None:
        self.limits = limits
        self.nodes_left = limits.max_nodes - 1  # the outermost value
        self.bytes_left = limits.max_bytes

    def nested(self, value: object, depth: int) -> Any:
        """A value (counted already) that is not a plain scalar; ``depth``:
        the containers still allowed, this one included."""
        kind = type(value)
        if kind is dict:
            return self.object(value, depth)  # type: ignore[arg-type]
        if kind is list or kind is tuple:
            return self.array(value, depth)  # type: ignore[arg-type]
        if kind is FrozenDict:
            return self.reuse(value, depth)  # type: ignore[arg-type]
        if issubclass(type(value), dict):
            return self.object(value, depth)
        if issubclass(type(value), (list, tuple)):
            return self.array(value, depth)
        return self.scalar(value)

    def scalar(self, value: object) -> Any:
        kind = type(value)
        if kind is str:
            self.add_bytes(len(value) if value.isascii() else utf8_size(value))  # type: ignore[attr-defined, arg-type]
            return value
        if kind is int:
            if MIN_INT <= value <= MAX_INT:  # type: ignore[operator]
                return value
            raise _NotPlain(f"an integer outside {MIN_INT}..{MAX_INT}")
        if kind is bool or value is None:
            return value
        if kind is float:
            if math.isfinite(value):  # type: ignore[arg-type]
                return value
            raise _NotPlain(repr(value))
        # A subclass of a JSON type is copied into the type, with the type's methods.
        if issubclass(type(value), str):
            return self.scalar(str.__str__(value))
        if issubclass(type(value), int):
            return self.scalar(int.__int__(value))
        if issubclass(type(value), float):
            return self.scalar(float.__float__(value))
        raise _NotPlain(_describe(value))

    def object(self, value: dict[Any, Any], depth: int) -> FrozenDict:
        if depth <= 0:
            raise _NotPlain("too deep")
        if type(value) is dict:  # a subclass is read with dict's own methods
            self.nodes_left -= len(value)
            items = value.items()
        else:
            self.nodes_left -= _dict_len(value)
            items = _dict_items(value)
        if self.nodes_left < 0:
            self.count(0)
        frozen = {}
        size = 0
        key: object = None
        try:
            for key, item in items:
                if type(key) is not str:
                    key = self.key(key)
                size += len(key) if key.isascii() else utf8_size(key)  # type: ignore[attr-defined, arg-type]
                kind = type(item)
                if kind is str:
                    size += len(item) if item.isascii() else utf8_size(item)
                elif kind is dict:
                    item = self.object(item, depth - 1)
                elif kind is list:
                    item = self.array(item, depth - 1)
                elif kind is int:
                    if not MIN_INT <= item <= MAX_INT:
                        self.scalar(item)
                elif not (kind is bool or item is None or (kind is float and math.isfinite(item))):
                    item = self.nested(item, depth - 1)
                frozen[key] = item
        except _NotPlain as err:
            if type(key) is str:  # a bad key names itself in the problem
                err.steps.append(key_step(key))
            raise
        self.bytes_left -= size
        if self.bytes_left < 0:
            self.add_bytes(0)
        result = _new(FrozenDict)
        _set_data(result, _proxy(frozen))
        return result  # type: ignore[no-any-return]

    def key(self, key: object) -> str:
        if issubclass(type(key), str):
            return str.__str__(key)
        raise _NotPlain(f"key {_safe_repr(key)} is not a string")

    def array(self, value: list[Any] | tuple[Any, ...], depth: int) -> tuple[Any, ...]:
        if depth <= 0:
            raise _NotPlain("too deep")
        kind = type(value)
        if kind is list:
            items = value.copy()
        else:
            items = list.copy(value) if issubclass(kind, list) else list(tuple.__iter__(value))
        self.nodes_left -= len(items)
        if self.nodes_left < 0:
            self.count(0)
        size = 0
        index = 0
        try:
            for item in items:
                kind = type(item)
                if kind is str:
                    size += len(item) if item.isascii() else utf8_size(item)
                elif kind is dict:
                    items[index] = self.object(item, depth - 1)
                elif kind is int:
                    if not MIN_INT <= item <= MAX_INT:
                        self.scalar(item)
                elif kind is list:
                    items[index] = self.array(item, depth - 1)
                elif not (kind is bool or item is None or (kind is float and math.isfinite(item))):
                    items[index] = self.nested(item, depth - 1)
                index += 1
        except _NotPlain as err:
            err.steps.append(f"[{index}]")
            raise
        self.bytes_left -= size
        if self.bytes_left < 0:
            self.add_bytes(0)
        return tuple(items)

    def reuse(self, value: FrozenDict, depth: int) -> FrozenDict:
        """An already frozen object: counted, never walked."""
        nodes, size, height = _size_of(value)
        if height > depth:
            return self.object(dict(value._data), depth)  # walked, to name the place
        self.count(nodes - 1)  # the object itself was counted by its container
        self.add_bytes(size)
        return value

    def count(self, nodes: int) -> None:
        self.nodes_left -= nodes
        if self.nodes_left < 0:
            raise _NotPlain(f"more than {self.limits.max_nodes} values")

    def add_bytes(self, size: int) -> None:
        self.bytes_left -= size
        if self.bytes_left < 0:
            raise _NotPlain(f"more than {self.limits.max_bytes} bytes of text")


def utf8_size(text: str) -> int:
    """The UTF-8 size of ``text``; _NotPlain if it is not Unicode scalar text."""
    try:
        return len(text.encode())
    except UnicodeEncodeError as err:
        char = ord(text[err.start])
        raise _NotPlain(f"text with a lone surrogate U+{char:04X}, not valid Unicode") from None


def freeze_json(value: object, path: str = "") -> Any:
    """Validate ``value`` as plain JSON data and return a deeply frozen copy.

    Raises :class:`InvalidMessageError` naming the offending place (for example
    ``input.tags[2]: not plain data (set)``) for bytes, sets, arbitrary objects,
    functions, NaN or infinity, integers outside the 64-bit range, text that
    is not valid Unicode (lone surrogates), non-string keys, cycles, and values
    past the :class:`JsonLimits` in force (nodes, depth, bytes).
    """
    limits = get_json_limits()
    try:
        walk = _Walk(limits)
        if type(value) is dict:
            return walk.object(value, limits.max_depth)  # type: ignore[arg-type]
        return walk.nested(value, limits.max_depth)
    except _NotPlain as err:
        raise _located(err, value, path, limits) from None
    except RecursionError:
        raise InvalidMessageError(path, "not plain data (nested too deeply)") from None
    except Exception as err:  # reading the caller's object failed
        raise InvalidMessageError(path, f"not plain data ({_error_name(err)})") from None


def freeze_object(value: object, path: str) -> FrozenDict:
    """:func:`freeze_json` for a value that must be a JSON object."""
    kind = type(value)
    if kind is dict:
        frozen = _fast_freeze(value, get_json_limits())  # type: ignore[arg-type]
        return frozen if frozen is not None else freeze_json(value, path)
    if kind is FrozenDict:
        return value  # type: ignore[return-value]
    if not issubclass(kind, dict):
        raise InvalidMessageError(path, f"expected a JSON object, got {_kind(value)}")
    return freeze_json(value, path)  # type: ignore[no-any-return]


def _located(err: _NotPlain, value: object, path: str, limits: JsonLimits) -> InvalidMessageError:
    steps = "".join(reversed(err.steps))
    why = err.why
    if why == "too deep":
        from turnkit.messages._cycles import cycle_steps

        cycle = cycle_steps(value, limits.max_depth)
        if cycle is None:
            why = f"more than {limits.max_depth} nested containers"
        else:
            steps, why = cycle, "a cycle"
    where = path + steps if path else steps.removeprefix(".")
    return InvalidMessageError(where, f"not plain data ({why})")


def _describe(value: object) -> str:
    kind = type(value)
    if issubclass(type(value), type):
        return "class"
    if callable(value):
        return "function"
    return str(kind.__name__)


def _kind(value: object) -> str:
    if issubclass(type(value), (list, tuple)):
        return "a list"
    if issubclass(type(value), str):
        return "a string"
    if value is None:
        return "null"
    return str(type(value).__name__)


def _error_name(err: BaseException) -> str:
    return f"reading it raised {type(err).__name__}"


def _safe_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def key_step(key: object) -> str:
    """``.name`` for an identifier, else ``['a.b']``: never confusable with a path."""
    if issubclass(type(key), str) and key.isidentifier() and key.isascii():
        return f".{key}"
    return f"[{_safe_repr(key)}]"


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of a frozen JSON value (dicts and lists)."""
    kind = type(value)
    if kind is FrozenDict:
        try:
            items = _get_data(value).items()
        except AttributeError:  # frozen in C, not read yet
            return _plain_copy(_get_raw(value))
    elif issubclass(type(value), (dict, FrozenDict)):
        items = value.items()
    elif issubclass(type(value), (tuple, list)):
        return [item if type(item) in _PLAIN else thaw(item) for item in value]
    else:
        return value
    return {key: item if type(item) in _PLAIN else thaw(item) for key, item in items}


_PLAIN = frozenset({str, int, float, bool, type(None)})

from turnkit.messages._json_fast import (  # noqa: E402 (it builds on FrozenDict)
    fast_freeze as _fast_freeze,
)
from turnkit.messages._json_fast import materialize as _materialize  # noqa: E402
from turnkit.messages._json_fast import plain_copy as _plain_copy  # noqa: E402
