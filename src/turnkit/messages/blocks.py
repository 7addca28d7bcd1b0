"""Content blocks and their sources: immutable structs, compared by value.

Every constructor checks its fields and raises :class:`InvalidMessageError`
with a path relative to the block (``source.data: not canonical base64``), so
an object that exists is valid, and validating it again costs nothing.
Dicts given for nested parts (``ImageBlock(source={...})``) are converted.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeAlias

import msgspec
from msgspec.structs import force_setattr

from turnkit.errors import InvalidMessageError
from turnkit.messages._checks import (
    check_base64,
    check_http_url,
    check_media_type,
    kind_of,
    need_bool,
    need_choice,
    need_str,
)
from turnkit.messages._count import current as _counting
from turnkit.messages._json import freeze_object, thaw
from turnkit.messages._wire import from_wire

__all__ = [
    "Base64Source",
    "Block",
    "CacheControl",
    "FileBlock",
    "ImageBlock",
    "Source",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "UrlSource",
    "block_from_dict",
]


class _Frozen(
    msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False, repr_omit_defaults=True
):
    """Base of every data class here: immutable, slotted, no unknown fields.

    ``gc=False`` is safe because frozen JSON values cannot form cycles.
    """


class CacheControl(_Frozen):
    """A prompt-cache breakpoint after a text block; ``ttl`` is "5m" or "1h"."""

    ttl: str | None = None

    def __post_init__(self) -> None:
        if self.ttl is not None:
            force_setattr(self, "ttl", need_choice(self.ttl, "ttl", ("5m", "1h")))

    def to_dict(self) -> dict[str, Any]:
        return {} if self.ttl is None else {"ttl": self.ttl}


class Base64Source(_Frozen, tag="base64", tag_field="type"):
    """Inline data: ``media_type`` ("image/png") and canonical base64 ``data``."""

    type: ClassVar[str] = "base64"
    media_type: str
    data: str

    def __post_init__(self) -> None:
        if not (type(self.media_type) is str and self.media_type.isascii()):
            force_setattr(self, "media_type", need_str(self.media_type, "media_type"))
        check_media_type(self.media_type, "media_type", image=False)
        if type(self.data) is not str:
            force_setattr(self, "data", need_str(self.data, "data"))
        check_base64(self.data, "data")

    def __repr__(self) -> str:
        return f"Base64Source(media_type={self.media_type!r}, data=<{len(self.data)} chars>)"

    def to_dict(self) -> dict[str, Any]:
        return {"type": "base64", "media_type": self.media_type, "data": self.data}


class UrlSource(_Frozen, tag="url", tag_field="type"):
    """Data at an absolute http(s) ``url``; ``media_type`` is optional."""

    type: ClassVar[str] = "url"
    url: str
    media_type: str | None = None

    def __post_init__(self) -> None:
        force_setattr(self, "url", check_http_url(self.url, "url"))
        if self.media_type is not None:
            if not (type(self.media_type) is str and self.media_type.isascii()):
                force_setattr(self, "media_type", need_str(self.media_type, "media_type"))
            check_media_type(self.media_type, "media_type", image=False)

    def to_dict(self) -> dict[str, Any]:
        if self.media_type is None:
            return {"type": "url", "url": self.url}
        return {"type": "url", "url": self.url, "media_type": self.media_type}


Source: TypeAlias = Base64Source | UrlSource


def _source(block: ImageBlock | FileBlock, *, image: bool) -> None:
    """Build the block's source from a dict if needed; images need image types."""
    source = block.source
    if not issubclass(type(source), (Base64Source, UrlSource)):
        if not issubclass(type(source), dict):
            raise InvalidMessageError("source", f"expected a source object, got {kind_of(source)}")
        source = from_wire(source, Source, "source")
        force_setattr(block, "source", source)
    if image and source.media_type is not None:
        check_media_type(source.media_type, "source.media_type", image=True)


class TextBlock(_Frozen, tag="text", tag_field="type"):
    """Text; ``cache`` marks a prompt-cache breakpoint after it."""

    type: ClassVar[str] = "text"
    text: str
    cache: CacheControl | None = None

    def __post_init__(self) -> None:
        text = self.text
        if not (type(text) is str and text.isascii()):
            text = need_str(text, "text")
            force_setattr(self, "text", text)
        if self.cache is not None and not issubclass(type(self.cache), CacheControl):
            force_setattr(self, "cache", from_wire(self.cache, CacheControl, "cache"))
        if (count := _counting()) is not None:  # counted inline: see turnkit.messages._count
            count.built_left -= 1
            count.chars_left -= len(text)
            if count.built_left < 0 or count.chars_left < 0:
                count.over()

    def to_dict(self) -> dict[str, Any]:
        if self.cache is None:
            return {"type": "text", "text": self.text}
        return {"type": "text", "text": self.text, "cache": self.cache.to_dict()}


class ImageBlock(_Frozen, tag="image", tag_field="type"):
    """An image (png, jpeg, gif or webp) given inline or by URL."""

    type: ClassVar[str] = "image"
    source: Source

    def __post_init__(self) -> None:
        _source(self, image=True)
        if (count := _counting()) is not None:
            count.built_left -= 1
            if count.built_left < 0:
                count.over()

    def to_dict(self) -> dict[str, Any]:
        return {"type": "image", "source": self.source.to_dict()}


class FileBlock(_Frozen, tag="file", tag_field="type"):
    """A document (PDF, text, ...) given inline or by URL, with its file name."""

    type: ClassVar[str] = "file"
    source: Source
    filename: str

    def __post_init__(self) -> None:
        _source(self, image=False)
        if not (type(self.filename) is str and self.filename.isascii()) or not self.filename:
            force_setattr(self, "filename", need_str(self.filename, "filename", non_empty=True))
        if (count := _counting()) is not None:
            count.built_left -= 1
            if count.built_left < 0:
                count.over()

    def to_dict(self) -> dict[str, Any]:
        return {"type": "file", "source": self.source.to_dict(), "filename": self.filename}


class ThinkingBlock(_Frozen, tag="thinking", tag_field="type"):
    """Model reasoning; ``signature`` lets the same model verify it on replay."""

    type: ClassVar[str] = "thinking"
    thinking: str
    signature: str | None = None
    redacted: bool = False

    def __post_init__(self) -> None:
        thinking = self.thinking
        if not (type(thinking) is str and thinking.isascii()):
            thinking = need_str(thinking, "thinking")
            force_setattr(self, "thinking", thinking)
        signature = self.signature
        if signature is not None and not (type(signature) is str and signature.isascii()):
            force_setattr(self, "signature", need_str(signature, "signature"))
        if self.redacted is not False:
            need_bool(self.redacted, "redacted")
        if (count := _counting()) is not None:
            count.built_left -= 1
            count.chars_left -= len(thinking)
            if count.built_left < 0 or count.chars_left < 0:
                count.over()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "thinking", "thinking": self.thinking}
        if self.signature is not None:
            out["signature"] = self.signature
        if self.redacted:
            out["redacted"] = True
        return out


class ToolUseBlock(_Frozen, tag="tool_use", tag_field="type"):
    """A tool call made by the model; ``input`` is a deeply frozen JSON object."""

    type: ClassVar[str] = "tool_use"
    id: str
    name: str
    input: Any

    def __post_init__(self) -> None:
        if not (type(self.id) is str and self.id.isascii()) or not self.id:
            force_setattr(self, "id", need_str(self.id, "id", non_empty=True))
        if not (type(self.name) is str and self.name.isascii()) or not self.name:
            force_setattr(self, "name", need_str(self.name, "name", non_empty=True))
        value = self.input
        count = _counting()
        if count is not None and (ahead := count.frozen.get(id(value))) is not None:
            force_setattr(self, "input", ahead)  # frozen with the others: see validate
        else:
            force_setattr(self, "input", freeze_object(value, "input"))

    def to_dict(self) -> dict[str, Any]:
        return {"type": "tool_use", "id": self.id, "name": self.name, "input": thaw(self.input)}


ResultPart: TypeAlias = TextBlock | ImageBlock | FileBlock
_RESULT_PARTS = (TextBlock, ImageBlock, FileBlock)


class ToolResultBlock(_Frozen, tag="tool_result", tag_field="type"):
    """The answer to the tool call ``tool_use_id``: a string or result parts."""

    type: ClassVar[str] = "tool_result"
    tool_use_id: str
    content: str | tuple[ResultPart, ...]
    is_error: bool = False

    def __post_init__(self) -> None:
        call_id = self.tool_use_id
        if not (type(call_id) is str and call_id.isascii()) or not call_id:
            force_setattr(self, "tool_use_id", need_str(call_id, "tool_use_id", non_empty=True))
        content = self.content
        if type(content) is str or issubclass(type(content), str):
            if not (type(content) is str and content.isascii()):
                force_setattr(self, "content", need_str(content, "content"))
        elif type(content) is not tuple or not _all_result_parts(content):
            force_setattr(self, "content", _result_parts(content))
        if (
            self.is_error is not False
            and need_bool(self.is_error, "is_error")
            and not issubclass(type(self.content), str)
        ):
            raise InvalidMessageError("content", "must be a string when is_error is true")
        if (count := _counting()) is not None:
            content = self.content
            count.built_left -= 1
            if type(content) is str:
                count.chars_left -= len(content)
            else:
                count.nodes_left -= len(content)
            if count.built_left < 0 or count.chars_left < 0 or count.nodes_left < 0:
                count.over()

    def to_dict(self) -> dict[str, Any]:
        content = self.content
        out: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": self.tool_use_id,
            "content": content if isinstance(content, str) else [p.to_dict() for p in content],
        }
        if self.is_error:
            out["is_error"] = True
        return out


def _all_result_parts(content: tuple[object, ...]) -> bool:
    return all(issubclass(type(part), _RESULT_PARTS) for part in content)


def _result_parts(value: object) -> tuple[ResultPart, ...]:
    if not issubclass(type(value), (list, tuple)):
        raise InvalidMessageError("content", f"expected a string or a list, got {kind_of(value)}")
    items = list.copy(value) if issubclass(type(value), list) else tuple.__iter__(value)
    parts = []
    for index, item in enumerate(items):
        part = block_from_dict(item, f"content[{index}]")
        if not issubclass(type(part), _RESULT_PARTS):
            problem = (
                f"a {part.type} block cannot be inside a tool_result (use text, image or file)"
            )
            raise InvalidMessageError(f"content[{index}]", problem)
        parts.append(part)
    return tuple(parts)


Block: TypeAlias = (
    TextBlock | ImageBlock | FileBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock
)
BLOCK_TYPES: tuple[type, ...] = (
    TextBlock,
    ImageBlock,
    FileBlock,
    ThinkingBlock,
    ToolUseBlock,
    ToolResultBlock,
)


def block_from_dict(data: object, path: str = "") -> Block:
    """Build a block from its wire dict; a block object is returned as is."""
    if issubclass(type(data), BLOCK_TYPES):
        return data  # type: ignore[return-value]
    if not issubclass(type(data), dict):
        hint = " (use a text block)" if issubclass(type(data), str) else ""
        raise InvalidMessageError(path, f"expected a content block, got {kind_of(data)}{hint}")
    return from_wire(data, Block, path)
