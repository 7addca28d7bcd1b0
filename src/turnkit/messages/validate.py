"""Validation at the API boundary: dicts or objects in, canonical objects out.

Sizes are counted as msgspec builds (:mod:`turnkit.messages._count`): one
walk over the caller's data, which counts and builds. Before it, a read of
the message and block dicts (no deeper) counts them and picks out the tool
inputs, which are frozen together (``_json_fast.fast_freeze_many``) and
taken by their blocks as those are built.
"""

from __future__ import annotations

from sys import getrefcount as _refs
from typing import Any

from turnkit.errors import InvalidMessageError
from turnkit.messages._checks import kind_of
from turnkit.messages._count import Count, OverLimit
from turnkit.messages._json_fast import fast_freeze_many
from turnkit.messages._limits import JsonLimits, get_json_limits
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
    kind = type(value)
    if kind is tuple or kind is list:
        for message in value:  # type: ignore[attr-defined]
            if type(message) is not Message:
                break
        else:  # all built already: nothing to build or count
            messages = tuple(value)  # type: ignore[arg-type]
            _check_unique_tool_ids(messages, path)
            return messages
    elif not issubclass(kind, (list, tuple)):
        raise InvalidMessageError(path, f"expected a list of messages, got {kind_of(value)}")
    limits = get_json_limits()
    inputs: list[object] = []
    nodes = _messages_and_blocks(value, inputs)
    try:
        with Count(limits, nodes, _inputs_frozen(inputs, limits)):
            messages = from_wire(value, tuple[Message, ...], path, messages=True)
    except OverLimit as over:
        raise _over_limit(over, path) from None
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


def _messages_and_blocks(value: object, inputs: list[object]) -> int:
    """The messages of a list and the blocks of those given as dicts (each
    time a list appears), read before anything is built (see ``_count``).

    The input of each tool_use block of an assistant message given as a
    plain dict, when it is a plain dict held by that block alone (not shared
    with another block, nested in another value or kept by the caller: see
    ``fast_freeze_many``), is put in ``inputs``, to be frozen together
    (:func:`_inputs_frozen`); whatever is left out is frozen by its block.
    """
    items = _items(value) or ()
    nodes = len(items)
    probe = _PROBE.get("input")
    held_once = _refs(probe)  # what one block's hold reads as, here (the interpreter's count)
    for item in items:
        kind = type(item)
        if kind is dict or (kind is not Message and issubclass(kind, dict)):
            content = dict.get(item, "content")  # type: ignore[arg-type]
            kind = type(content)
            if kind is list:
                nodes += len(content)  # type: ignore[arg-type]
                role = dict.get(item, "role")  # type: ignore[arg-type]
                # tested as exact strs first: a str subclass's __eq__ is never asked
                if type(role) is not str or role != "assistant":
                    continue
                for block in content:  # type: ignore[attr-defined]
                    block_type = block.get("type") if type(block) is dict else None
                    if type(block_type) is str and block_type == "tool_use":
                        tool_input = block.get("input")  # type: ignore[attr-defined]
                        if type(tool_input) is dict and _refs(tool_input) == held_once:
                            inputs.append(tool_input)
            elif kind is tuple:
                nodes += len(content)  # type: ignore[arg-type]
            elif issubclass(kind, list):
                nodes += list.__len__(content)  # type: ignore[arg-type]
            elif issubclass(kind, tuple):
                nodes += tuple.__len__(content)  # type: ignore[arg-type]
    return nodes


_PROBE: dict[str, object] = {"input": {}}
"""A value held by one block: its reference count, read as the inputs' are, is
what an input held by its block alone reads as."""


def _inputs_frozen(inputs: list[object], limits: JsonLimits) -> dict[int, Any]:
    """The tool inputs the C path proves plain together (see ``fast_freeze_many``);
    the others are frozen by their block, one by one, as before."""
    if len(inputs) < 2:
        return {}
    return fast_freeze_many(inputs, limits)


def _over_limit(over: OverLimit, path: str) -> InvalidMessageError:
    limits = get_json_limits()
    if over.what == "chars":
        problem = f"more than {limits.max_bytes} characters of text (JsonLimits.max_bytes)"
    else:
        problem = f"more than {limits.max_nodes} messages, blocks and parts (JsonLimits.max_nodes)"
    return InvalidMessageError(path, problem)


def _check_unique_tool_ids(messages: tuple[Message, ...], path: str) -> None:
    ids = [
        block.id
        for message in messages
        if message.role == "assistant"
        for block in message.content
        if type(block) is ToolUseBlock
    ]
    if len(set(ids)) == len(ids):
        return
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
    try:
        with Count(get_json_limits(), len(_items(value) or ())):
            blocks = from_wire(value, tuple[Block, ...], path)
    except OverLimit as over:
        raise _over_limit(over, path) from None
    seen: set[str] = set()
    for index, block in enumerate(blocks):
        if type(block) is ToolUseBlock:
            if block.id in seen:
                raise InvalidMessageError(
                    f"{path}[{index}].id", f"duplicate tool_use id {block.id!r}"
                )
            seen.add(block.id)
    return blocks
