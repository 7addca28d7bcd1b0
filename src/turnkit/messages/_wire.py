"""Wire dicts to objects through msgspec, with turnkit's error paths.

msgspec checks types and builds the immutable structs in C, calling each
class's ``__post_init__`` for the checks it cannot express. Its errors are
turned into :class:`InvalidMessageError` with a path in the caller's terms.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from turnkit.errors import InvalidMessageError

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
_NESTED_PART = re.compile(r".*content\[\d+\]\.content\[\d+\]\.type")
_EXPECTED = re.compile(r"Expected `([^`]+)`(?:, got `([^`]+)`)?")
_FIELD = re.compile(r"Object (missing required|contains unknown) field `([^`]+)`")
_BAD_VALUE = re.compile(r"Invalid (?:enum )?value (.+)")
_CHOICES = {
    "role": ("unknown role", "system, user or assistant"),
    "type": ("unknown type", None),
    "ttl": ("unknown ttl", "'5m' or '1h'"),
}


def from_wire(value: Any, kind: type[T] | Any, root: str) -> T:
    """Convert ``value`` to ``kind``; errors name their place under ``root``."""
    try:
        return msgspec.convert(value, kind)
    except msgspec.ValidationError as err:
        raise _translate(err, root) from None


def _translate(err: msgspec.ValidationError, root: str) -> InvalidMessageError:
    text, _, where = str(err).rpartition(" - at `")
    if not text:
        text, where = where, "$`"
    if where.startswith("key` in `"):
        return InvalidMessageError(_path(root, where[9:-1]), "object keys must be strings")
    path = _path(root, where[:-1])
    cause = err.__cause__ or err.__context__
    if isinstance(cause, InvalidMessageError):
        return cause.within(path)
    return _problem(text, path)


def _path(root: str, location: str) -> str:
    path = root + location[1:] if location.startswith("$") else root
    return path[1:] if path.startswith(".") else path


def _problem(text: str, path: str) -> InvalidMessageError:
    if match := _FIELD.fullmatch(text):
        problem = "required field is missing" if match[1] == "missing required" else "unknown field"
        return InvalidMessageError(f"{path}.{match[2]}" if path else match[2], problem)
    if match := _EXPECTED.fullmatch(text):
        expected = _TYPE_NAMES.get(match[1], match[1])
        got = _TYPE_NAMES.get(match[2], match[2]) if match[2] else None
        if match[2] == "str" and match[1] == "array" and path.endswith("content"):
            problem = "expected a list of content blocks, got a string (use a text block)"
            return InvalidMessageError(path, problem)
        if match[2] == "str" and match[1] == "object" and path.endswith("]"):
            problem = "expected a content block, got a string (use a text block)"
            return InvalidMessageError(path, problem)
        return InvalidMessageError(
            path, f"expected {expected}, got {got}" if got else f"expected {expected}"
        )
    if match := _BAD_VALUE.fullmatch(text):
        field = path.rpartition(".")[2]
        what, allowed = _CHOICES.get(field, ("invalid value", None))
        if field == "type":
            what, allowed = _type_choices(path)
        hint = f" (use {allowed})" if allowed else ""
        return InvalidMessageError(path, f"{what} {match[1]}{hint}")
    return InvalidMessageError(path, text[:1].lower() + text[1:])


def _type_choices(path: str) -> tuple[str, str]:
    """What a bad ``type`` value means, judged by where it sits."""
    if _NESTED_PART.fullmatch(path):
        return "block type not allowed in a tool_result:", "text, image or file"
    if path.endswith("source.type"):
        return "unknown source type", "'base64' or 'url'"
    if "content[" in path.rpartition(".")[0] or path.startswith("blocks"):
        return "unknown block type", "text, image, file, thinking, tool_use or tool_result"
    return "unknown message type", "standard, compaction, branch_summary or custom"
