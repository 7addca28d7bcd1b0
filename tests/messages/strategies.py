"""Hypothesis strategies for turnkit messages, shared with the providers' tests.

- ``json_values`` / ``json_objects``: plain JSON data, as turnkit accepts it.
- ``anything``: JSON-like junk (NaN, bytes, sets, non-string keys, dicts shaped
  like messages and blocks with random fields) for "never crashes" properties.
- ``messages`` / ``message_lists``: valid :class:`Message` objects of every role
  and block type; ``histories``: valid lists whose tool results answer, miss or
  orphan the calls, for the pipeline properties.
- ``wire_message_lists``: valid lists of wire dicts (mutable, nested), to check
  that validation never aliases the caller's data.
"""

from __future__ import annotations

import base64
import itertools
from collections.abc import Iterator
from typing import Any

from hypothesis import strategies as st

from turnkit.messages import (
    Base64Source,
    Block,
    CacheControl,
    FileBlock,
    ImageBlock,
    Message,
    Origin,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
)

__all__ = [
    "anything",
    "assistant_blocks",
    "base64_data",
    "blocks",
    "file_blocks",
    "histories",
    "image_blocks",
    "json_objects",
    "json_values",
    "message_lists",
    "messages",
    "result_parts",
    "shaped_dicts",
    "sources",
    "text_blocks",
    "thinking_blocks",
    "tool_inputs",
    "user_blocks",
    "wire_message_lists",
]

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
FILE_TYPES = ("application/pdf", "text/plain", "text/csv", *IMAGE_TYPES)

short_text = st.text(max_size=12)
names = st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=8)

# -- plain JSON ---------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | short_text
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(short_text, inner, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(short_text, json_values, max_size=5)
tool_inputs = json_objects

# -- sources and blocks ---------------------------------------------------------

base64_data = st.binary(min_size=1, max_size=24).map(lambda raw: base64.b64encode(raw).decode())
http_urls = st.builds("{}://{}.example/{}".format, st.sampled_from(("http", "https")), names, names)


def sources(media_types: tuple[str, ...] = FILE_TYPES) -> st.SearchStrategy[Any]:
    """Base64 or URL sources whose media types come from ``media_types``."""
    kinds = st.sampled_from(media_types)
    return st.builds(Base64Source, kinds, base64_data) | st.builds(
        UrlSource, http_urls, st.none() | kinds
    )


caches = st.none() | st.builds(CacheControl, st.sampled_from((None, "5m", "1h")))
text_blocks = st.builds(TextBlock, short_text, caches)
image_blocks = st.builds(ImageBlock, sources(IMAGE_TYPES))
file_blocks = st.builds(FileBlock, sources(), names.map(lambda name: f"{name}.pdf"))
thinking_blocks = st.builds(ThinkingBlock, short_text, st.none() | short_text, st.booleans())
result_parts = st.one_of(text_blocks, image_blocks, file_blocks)


tool_use_blocks = st.builds(ToolUseBlock, names, names, tool_inputs)


def _tool_result(call_id: str) -> st.SearchStrategy[ToolResultBlock]:
    failed = st.builds(ToolResultBlock, st.just(call_id), short_text, st.just(True))
    passed = st.builds(
        ToolResultBlock,
        st.just(call_id),
        short_text | st.lists(result_parts, max_size=3).map(tuple),
    )
    return failed | passed


assistant_blocks = st.one_of(
    text_blocks, image_blocks, file_blocks, thinking_blocks, tool_use_blocks
)
user_blocks = st.one_of(result_parts, names.flatmap(_tool_result))
blocks = st.one_of(assistant_blocks, user_blocks)


def _renumbered_blocks(items: list[Block], ids: Iterator[int]) -> tuple[Block, ...]:
    """The blocks with tool_use ids drawn from ``ids``: call_0, call_1, ..."""
    return tuple(
        ToolUseBlock(f"call_{next(ids)}", block.name, block.input)
        if isinstance(block, ToolUseBlock)
        else block
        for block in items
    )


def _renumbered(items: list[Message]) -> list[Message]:
    """The messages with tool_use ids made unique across the list."""
    ids = itertools.count()
    return [
        message.clone(content=_renumbered_blocks(list(message.content), ids)) for message in items
    ]


# -- messages -------------------------------------------------------------------

origins = st.builds(Origin, names, names)
message_types = st.sampled_from(("standard", "standard", "compaction", "branch_summary", "custom"))
_PARTS = {"system": text_blocks, "user": user_blocks, "assistant": assistant_blocks}


@st.composite
def _message(draw: st.DrawFn, roles: tuple[str, ...]) -> Message:
    role = draw(st.sampled_from(roles))
    content = _renumbered_blocks(draw(st.lists(_PARTS[role], max_size=4)), itertools.count())
    return Message(
        role,
        content,
        type=draw(message_types),
        id=draw(st.none() | short_text),
        metadata=draw(st.none() | json_objects),
        origin=draw(st.none() | origins) if role == "assistant" else None,
        invocation_id=draw(st.none() | names),
    )


def messages(roles: tuple[str, ...] = ("system", "user", "assistant")) -> st.SearchStrategy[Any]:
    """A valid message of one of ``roles``, with random optional fields."""
    return _message(roles)


message_lists = st.lists(messages(), max_size=6).map(_renumbered)
"""Valid lists: tool_use ids are unique across the list."""

# -- histories for normalize_tool_call_history ----------------------------------


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """Valid histories whose results answer calls, miss them, repeat or orphan."""
    history: list[Message] = []
    issued: list[str] = []
    ids = itertools.count()
    for _ in range(draw(st.integers(0, 7))):
        role = draw(st.sampled_from(("user", "user", "assistant", "assistant", "system")))
        if role == "system":
            history.append(draw(messages(("system",))))
            continue
        if role == "assistant":
            content = _renumbered_blocks(draw(st.lists(assistant_blocks, max_size=4)), ids)
            issued += [block.id for block in content if isinstance(block, ToolUseBlock)]
            history.append(Message("assistant", content))
            continue
        content = []
        for _ in range(draw(st.integers(0, 4))):
            if draw(st.booleans()):
                call_id = draw(st.sampled_from(issued) if issued else names)
                content.append(draw(_tool_result(call_id)))
            else:
                content.append(draw(result_parts))
        history.append(Message("user", tuple(content)))
    return history


# -- wire dicts -------------------------------------------------------------------


@st.composite
def wire_message_lists(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Valid wire dicts, freshly built (the caller may mutate them)."""
    wire = [message.to_dict() for message in draw(message_lists)]
    for message in wire:
        if draw(st.booleans()):
            message["metadata"] = draw(json_objects)
    return wire


# -- junk -------------------------------------------------------------------------

_junk_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()  # NaN and infinities included
    | short_text
    | st.binary(max_size=4)
    | st.sampled_from(("user", "assistant", "system", "text", "base64", "url", "image/png"))
    | base64_data
    | http_urls
)
_hashables = st.none() | st.booleans() | st.integers() | short_text | st.binary(max_size=4)
_BLOCK_FIELDS = (
    "text", "cache", "source", "filename", "thinking", "signature", "redacted", "id",
    "name", "input", "tool_use_id", "content", "is_error", "media_type", "data", "url",
)  # fmt: skip
_MESSAGE_FIELDS = ("content", "type", "id", "metadata", "origin", "invocation_id", "extra")
_BLOCK_TYPES = ("text", "image", "file", "thinking", "tool_use", "tool_result", "base64", "url")


def _shaped(inner: st.SearchStrategy[Any], *, lists: bool = True) -> st.SearchStrategy[Any]:
    """Dicts shaped like blocks, sources and messages, with random field values."""
    block = st.builds(
        lambda kind, fields: {**fields, "type": kind} if kind is not None else fields,
        st.none() | st.sampled_from(_BLOCK_TYPES) | inner,
        st.dictionaries(st.sampled_from(_BLOCK_FIELDS), inner, max_size=4),
    )
    message = st.builds(
        lambda role, fields: {**fields, "role": role} if role is not None else fields,
        st.none() | st.sampled_from(("user", "assistant", "system", "bot")) | inner,
        st.dictionaries(
            st.sampled_from(_MESSAGE_FIELDS), st.lists(block, max_size=3) | inner, max_size=3
        ),
    )
    return block | message | st.lists(message, max_size=3) if lists else block | message


anything = st.recursive(
    _junk_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(short_text, inner, max_size=4),
        st.dictionaries(_hashables, inner, max_size=3),
        st.frozensets(_hashables, max_size=3),
        st.sets(_hashables, max_size=3),
        _shaped(inner),
    ),
    max_leaves=16,
)
shaped_dicts = _shaped(anything, lists=False)
"""Dicts shaped like messages and blocks, with junk field values."""
