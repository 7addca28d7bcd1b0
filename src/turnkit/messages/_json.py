"""Deeply frozen JSON values.

Objects become :class:`FrozenDict`, arrays become tuples, scalars stay as they
are. Freezing copies containers only (O(structure)); strings are shared, never
copied, which is what makes a defensive copy of a message cheap whatever the
size of the data inside it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NoReturn

from turnkit.errors import InvalidMessageError

__all__ = ["MAX_DEPTH", "FrozenDict", "freeze_json", "thaw"]

MAX_DEPTH = 64
"""Containers a JSON value may nest, counting the outermost one."""

_SCALARS = frozenset({str, int, bool, type(None)})


class FrozenDict(dict):
    """A dict that refuses to change.

    It is a real ``dict`` so that ``json.dumps`` and provider SDKs take it as
    is; every mutating method raises ``TypeError``. Values inside are frozen
    too. Use :func:`thaw` for a plain, mutable deep copy.
    """

    __slots__ = ("_hash",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        dict.__init__(self, freeze_json(dict(*args, **kwargs)))

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("FrozenDict is immutable; use turnkit.messages.thaw() for a mutable copy")

    __setitem__ = __delitem__ = __ior__ = _refuse  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]

    def __hash__(self) -> int:  # type: ignore[override]
        try:
            return self._hash
        except AttributeError:
            self._hash = hash(frozenset(self.items()))
            return self._hash

    def __copy__(self) -> FrozenDict:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> FrozenDict:
        return self

    def __reduce__(self) -> tuple[type[FrozenDict], tuple[dict[str, Any]]]:
        return (_from_pairs, (dict(self),))  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"


def _from_pairs(pairs: dict[str, Any]) -> FrozenDict:
    return FrozenDict(pairs)


class _CheckedFrozenDict(FrozenDict):
    """A FrozenDict built by this module's walk: its values are known frozen."""

    __slots__ = ()
    __init__ = dict.__init__  # type: ignore[assignment]


class _NotPlain(Exception):
    """Raised inside the walk; turned into InvalidMessageError at the top."""

    def __init__(self, why: str) -> None:
        self.why = why
        self.steps: list[str] = []


def freeze_json(value: object, path: str = "") -> Any:
    """Validate ``value`` as plain JSON data and return a deeply frozen copy.

    Raises :class:`InvalidMessageError` naming the offending place (for example
    ``input.tags[2]: not plain data (set)``) for bytes, sets, arbitrary objects,
    functions, NaN or infinity, non-string keys, cycles, and more than
    :data:`MAX_DEPTH` nested containers.
    """
    try:
        return _freeze(value, 1)
    except _NotPlain as err:
        steps = "".join(reversed(err.steps))
        why = err.why
        if why == "too deep":
            cycle = _cycle_steps(value)
            if cycle is None:
                why = f"more than {MAX_DEPTH} nested containers"
            else:
                steps, why = cycle, "a cycle"
        where = path + steps if path else steps.removeprefix(".")
        raise InvalidMessageError(where, f"not plain data ({why})") from None


def _freeze(value: object, depth: int) -> Any:
    """Freeze one value; scalars are the caller's fast path, so check them last."""
    kind = type(value)
    if kind is dict:
        return _freeze_object(value, depth)  # type: ignore[arg-type]
    if kind is list or kind is tuple:
        return _freeze_array(value, depth)  # type: ignore[arg-type]
    if kind in _SCALARS:
        return value
    if kind is float:
        if math.isfinite(value):  # type: ignore[arg-type]
            return value
        raise _NotPlain(repr(value))
    if isinstance(value, Mapping):
        return _freeze_object(value, depth)
    raise _NotPlain(_describe(value))


def _freeze_object(value: Mapping[Any, Any], depth: int) -> FrozenDict:
    if depth > MAX_DEPTH:
        raise _NotPlain("too deep")
    frozen = {}
    scalars = _SCALARS
    for key, item in value.items():
        if type(key) is not str:
            raise _NotPlain(f"key {key!r} is not a string")
        if type(item) in scalars:
            frozen[key] = item
            continue
        try:
            frozen[key] = _freeze(item, depth + 1)
        except _NotPlain as err:
            err.steps.append(_key_step(key))
            raise
    return _CheckedFrozenDict(frozen)


def _freeze_array(value: list[Any] | tuple[Any, ...], depth: int) -> tuple[Any, ...]:
    if depth > MAX_DEPTH:
        raise _NotPlain("too deep")
    scalars = _SCALARS
    if scalars.issuperset(map(type, value)):
        return tuple(value)
    frozen = []
    for index, item in enumerate(value):
        try:
            frozen.append(item if type(item) in scalars else _freeze(item, depth + 1))
        except _NotPlain as err:
            err.steps.append(f"[{index}]")
            raise
    return tuple(frozen)


def _describe(value: object) -> str:
    if callable(value):
        return "function" if not isinstance(value, type) else "class"
    return type(value).__name__


def _cycle_steps(value: object) -> str | None:
    """The path to where a container holds itself, if one does.

    Only asked once a walk ran too deep, so it need not be fast.
    """
    on_path: set[int] = set()

    def visit(item: object) -> list[str] | None:
        if isinstance(item, Mapping):
            children = [(_key_step(key), child) for key, child in item.items()]
        elif isinstance(item, (list, tuple)):
            children = [(f"[{index}]", child) for index, child in enumerate(item)]
        else:
            return None
        if id(item) in on_path:
            return []
        if len(on_path) > MAX_DEPTH * 4:
            return None
        on_path.add(id(item))
        for step, child in children:
            found = visit(child)
            if found is not None:
                found.append(step)
                return found
        on_path.discard(id(item))
        return None

    found = visit(value)
    return None if found is None else "".join(reversed(found))


def _key_step(key: object) -> str:
    return f".{key}" if isinstance(key, str) and key.isidentifier() else f"[{key!r}]"


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of a frozen JSON value (dicts and lists)."""
    if isinstance(value, dict):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return [thaw(item) for item in value]
    return value
