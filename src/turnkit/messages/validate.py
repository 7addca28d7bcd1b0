"""Validation at the API boundary: dicts or objects in, canonical objects out."""

from __future__ import annotations

from turnkit.errors import InvalidMessageError
from turnkit.messages._checks import kind_of
from turnkit.messages._limits import get_json_limits
from turnkit.messages._wire import from_wire
from turnkit.messages.blocks import Block, ToolUseBlock
from turnkit.messages.message import Message

__all__ = ["validate_blocks", "validate_messages"]


def validate_messages(value: object, *, path: str = "messages") -> tuple[Message, ...]:
    """Check a list of messages (dicts, :class:`Message` objects, or both).

    Returns canonical, immutable messages. Message objects are reused as they
    are (they were checked when built), so the cost is O(structure) and image
    data is never read twice. Raises :class:`InvalidMessageError` naming the
    first problem, e.g. ``messages[1].content[0].source.data: not canonical base64``.
    """
    if not issubclass(type(value), (list, tuple)):
        raise InvalidMessageError(path, f"expected a list of messages, got {kind_of(value)}")
    _check_count(value, path, messages=True)
    messages = from_wire(value, tuple[Message, ...], path, messages=True)
    _check_unique_tool_ids(messages, path)
    return messages


def _items(value: object) -> list[object] | tuple[object, ...] | None:
    """The items of a list or tuple, read with the built-in's own methods."""
    kind = type(value)
    if kind is list or kind is tuple:
        return value  # type: ignore[return-value]
    if issubclass(kind, list):
        return list.copy(value)  # type: ignore[arg-type]
    if issubclass(kind, tuple):
        return tuple(tuple.__iter__(value))  # type: ignore[arg-type]
    return None


def _check_count(value: object, path: str, *, messages: bool) -> None:
    """Refuse, before building anything, a list of more than ``max_nodes`` messages,
    blocks and tool_result parts (lists shared many times over count each time)."""
    limit = get_json_limits().max_nodes
    items = _items(value) or ()
    total = len(items)
    if not messages:
        total += _parts_in(items, {})
    else:
        seen: dict[int, tuple[object, int]] = {}
        for item in items:
            if issubclass(type(item), dict):
                content = _items(dict.get(item, "content"))  # type: ignore[arg-type]
                if content is not None:
                    total += len(content) + _parts_in(content, seen)
            if total > limit:
                break
    if total > limit:
        problem = f"more than {limit} messages, blocks and parts (JsonLimits.max_nodes)"
        raise InvalidMessageError(path, problem)


def _parts_in(
    blocks: list[object] | tuple[object, ...], seen: dict[int, tuple[object, int]]
) -> int:
    """The tool_result parts in ``blocks``; a list met before is not read again
    (``seen`` keeps each list alive, so its id stays its own)."""
    known = seen.get(id(blocks))
    if known is not None:
        return known[1]
    found = 0
    for block in blocks:
        kind = dict.get(block, "type") if issubclass(type(block), dict) else None  # type: ignore[arg-type]
        if type(kind) is str and kind == "tool_result":  # exact str: no caller __eq__
            parts = _items(dict.get(block, "content"))  # type: ignore[arg-type]
            found += 0 if parts is None else len(parts)
    seen[id(blocks)] = (blocks, found)
    return found


def _check_unique_tool_ids(messages: tuple[Message, ...], path: str) -> None:
    first_seen: dict[str, tuple[int, int]] = {}
    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        for position, block in enumerate(message.content):
            if type(block) is not ToolUseBlock:
                continue
            if block.id in first_seen:
                first = "{}[{}].content[{}]".format(path, *first_seen[block.id])
                raise InvalidMessageError(
                    f"{path}[{index}].content[{position}].id",
                    f"duplicate tool_use id {block.id!r} (first at {first})",
                )
            first_seen[block.id] = (index, position)


def validate_blocks(value: object, *, path: str = "blocks") -> tuple[Block, ...]:
    """Check a list of content blocks (dicts, block objects, or both).

    A bare string item is refused: wrap text in a text block.
    """
    if not issubclass(type(value), (list, tuple)):
        raise InvalidMessageError(path, f"expected a list of content blocks, got {kind_of(value)}")
    _check_count(value, path, messages=False)
    blocks = from_wire(value, tuple[Block, ...], path)
    seen: set[str] = set()
    for index, block in enumerate(blocks):
        if type(block) is ToolUseBlock:
            if block.id in seen:
                raise InvalidMessageError(
                    f"{path}[{index}].id", f"duplicate tool_use id {block.id!r}"
                )
            seen.add(block.id)
    return blocks
