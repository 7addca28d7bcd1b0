"""Validation at the API boundary: dicts or objects in, canonical objects out."""

from __future__ import annotations

from turnkit.errors import InvalidMessageError
from turnkit.messages._checks import kind_of
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
    messages = from_wire(value, tuple[Message, ...], path, messages=True)
    _check_unique_tool_ids(messages, path)
    return messages


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
