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
    blocks and tool_result parts, or whose text (of text and thinking blocks and
    tool results) is over ``max_bytes`` characters. Lists and strings shared many
    times over count each time, as they would be written out."""
    limits = get_json_limits()
    items = _items(value) or ()
    seen: dict[int, tuple[object, int, int]] = {}
    nodes, chars = len(items), 0
    if not messages:
        nodes, chars = _measure(items, seen)
    else:
        max_nodes, max_chars = limits.max_nodes, limits.max_bytes
        for item in items:
            kind = type(item)
            if kind is dict or (kind is not Message and issubclass(kind, dict)):
                content = dict.get(item, "content")  # type: ignore[arg-type]
                if type(content) is not list:
                    content = _items(content)
                if content is not None:
                    inner = _measure(content, seen)
                    nodes += inner[0]
                    chars += inner[1]
                    if nodes > max_nodes or chars > max_chars:
                        break
    if nodes > limits.max_nodes:
        problem = f"more than {limits.max_nodes} messages, blocks and parts (JsonLimits.max_nodes)"
        raise InvalidMessageError(path, problem)
    if chars > limits.max_bytes:
        problem = f"more than {limits.max_bytes} characters of text (JsonLimits.max_bytes)"
        raise InvalidMessageError(path, problem)


_TEXT_FIELDS = {"text": "text", "thinking": "thinking", "tool_result": "content"}


def _measure(
    blocks: list[object] | tuple[object, ...], seen: dict[int, tuple[object, int, int]]
) -> tuple[int, int]:
    """(blocks and parts, characters of text) in ``blocks``; a list met before is
    not read again (``seen`` keeps each list alive, so its id stays its own)."""
    key = id(blocks)
    if key in seen:
        known = seen[key]
        return known[1], known[2]
    nodes, chars = len(blocks), 0
    get, fields = dict.get, _TEXT_FIELDS
    for block in blocks:
        if type(block) is not dict and not issubclass(type(block), dict):
            continue
        kind = get(block, "type")  # type: ignore[arg-type]
        field = fields.get(kind) if type(kind) is str else None  # exact: no caller __eq__
        if field is None:
            continue
        text = get(block, field)  # type: ignore[arg-type]
        if type(text) is str:
            chars += len(text)
        elif field == "content" and (parts := _items(text)) is not None:
            inner = _measure(parts, seen)
            nodes, chars = nodes + inner[0], chars + inner[1]
    seen[key] = (blocks, nodes, chars)
    return nodes, chars


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
