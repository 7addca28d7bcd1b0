"""Wire dicts to objects through msgspec, with turnkit's error paths.

msgspec checks types and builds the immutable structs in C, calling each
class's ``__post_init__`` for the checks it cannot express. Its errors are
turned into :class:`InvalidMessageError` with a path in the caller's terms.

msgspec reports errors as text only, so its wording is read here: pyproject
pins msgspec's minor version, and ``tests/messages/test_wire_errors.py``
checks msgspec's wording and our translation for each kind of error.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from turnkit.errors import InvalidMessageError
from turnkit.messages._count import OverLimit
from turnkit.messages._json import key_step

T = TypeVar("T")

_TYPE_NAMES = {
    "str": "a string",
    "int": "an integer",
    "float": "a number",
    "bool": "a boolean",
    "null": "null",
    "array": "a list",
    "object": "an object",
    "bytes": "bytes",
    "list": "a list",
    "tuple": "a list",
    "dict": "an object",
    "set": "a set",
    "NoneType": "null",
}
_EXPECTED = re.compile(r"Expected `([^`]+)`(?:, got `([^`]+)`)?")
_FIELD = re.compile(r"Object (missing required|contains unknown) field `([^`]*)`")
_BAD_VALUE = re.compile(r"Invalid (?:enum )?value (.+)")
_CHOICES = {
    "role": ("unknown role", "system, user or assistant"),
    "type": ("unknown type", None),
    "ttl": ("unknown ttl", "'5m' or '1h'"),
}


def from_wire(value: Any, kind: type[T] | Any, root: str, *, messages: bool = False) -> T:
    """Convert ``value`` to ``kind``; errors name their place under ``root``.

    ``messages`` says that ``value`` is a message or a list of them (rather
    than blocks), which decides how a bad ``type`` or a non-object is named.
    """
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as err:
        raise _translate(err, root, messages) from None
    except (InvalidMessageError, OverLimit):
        raise
    except Exception as err:  # e.g. a key that is not Unicode text
        raise _unreadable(value, root, err) from None


def _unreadable(value: Any, root: str, err: Exception) -> InvalidMessageError:
    """Name the first key or string of ``value`` that is not Unicode scalar text."""
    found = _bad_text(value, 0)
    if found is None:
        return InvalidMessageError(root, f"could not be read ({type(err).__name__})")
    steps = "".join(reversed(found))
    where = (root + steps) if root else steps.removeprefix(".")
    return InvalidMessageError(where, "text holds a lone surrogate; it is not valid Unicode")


def _bad_text(value: Any, depth: int) -> list[str] | None:
    if issubclass(type(value), str):
        return None if _encodable(value) else []
    if depth > 64:
        return None
    if issubclass(type(value), dict):
        for key, item in dict.items(value):
            if issubclass(type(key), str) and not _encodable(key):
                return [key_step(key)]
            found = _bad_text(item, depth + 1)
            if found is not None:
                found.append(key_step(key))
                return found
    elif issubclass(type(value), (list, tuple)):
        items = list.copy(value) if issubclass(type(value), list) else tuple.__iter__(value)
        for index, item in enumerate(items):
            found = _bad_text(item, depth + 1)
            if found is not None:
                found.append(f"[{index}]")
                return found
    return None


def _encodable(text: str) -> bool:
    try:
        str.encode(text)
    except UnicodeEncodeError:
        return False
    return True


def _translate(err: msgspec.ValidationError, root: str, messages: bool) -> InvalidMessageError:
    text, _, where = str(err).rpartition(" - at `")
    if not text:
        text, where = where, "$`"
    if where.startswith("key` in `"):
        return InvalidMessageError(_path(root, where[9:-1]), "object keys must be strings")
    location = where[:-1]
    path = _path(root, location)
    cause = err.__cause__ or err.__context__
    if isinstance(cause, InvalidMessageError):
        return cause.within(path)
    # 0: a message, 1: a block, 2: a part of a tool_result
    level = location.count("content[") + (0 if messages else 1)
    return _problem(text, path, level)


def _path(root: str, location: str) -> str:
    path = root + location[1:] if location.startswith("$") else root
    return path[1:] if path.startswith(".") else path


def _problem(text: str, path: str, level: int) -> InvalidMessageError:
    if match := _FIELD.fullmatch(text):
        problem = "required field is missing" if match[1] == "missing required" else "unknown field"
        step = key_step(match[2])
        return InvalidMessageError(path + step if path else step.removeprefix("."), problem)
    if match := _EXPECTED.fullmatch(text):
        expected = _type_names(match[1])
        got = _type_names(match[2]) if match[2] else None
        if match[2] == "str" and match[1] == "array" and path.endswith("content"):
            problem = "expected a list of content blocks, got a string (use a text block)"
            return InvalidMessageError(path, problem)
        if match[1] == "object" and path.endswith("]"):
            if level == 0:
                return InvalidMessageError(path, f"expected a message object, got {got}")
            hint = " (use a text block)" if match[2] == "str" else ""
            return InvalidMessageError(path, f"expected a content block, got {got}{hint}")
        return InvalidMessageError(
            path, f"expected {expected}, got {got}" if got else f"expected {expected}"
        )
    if match := _BAD_VALUE.fullmatch(text):
        field = path.rpartition(".")[2]
        what, allowed = _CHOICES.get(field, ("invalid value", None))
        if field == "type":
            what, allowed = _type_choices(path, level)
        hint = f" (use {allowed})" if allowed else ""
        return InvalidMessageError(path, f"{what} {match[1]}{hint}")
    return InvalidMessageError(path, text[:1].lower() + text[1:])


def _type_names(spec: str) -> str:
    """msgspec's ``str | null`` in words: ``a string or null``."""
    return " or ".join(_TYPE_NAMES.get(name, name) for name in spec.split(" | "))


def _type_choices(path: str, level: int) -> tuple[str, str]:
    """What a bad ``type`` value means, judged by where it sits."""
    if path.endswith("source.type"):
        return "unknown source type", "'base64' or 'url'"
    if level == 0:
        return "unknown message type", "standard, compaction, branch_summary or custom"
    if level == 1:
        return "unknown block type", "text, image, file, thinking, tool_use or tool_result"
    return "block type not allowed in a tool_result:", "text, image or file"
