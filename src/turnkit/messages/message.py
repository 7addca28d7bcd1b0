"""The immutable :class:`Message`: a role, content blocks and a few fields."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import unquote_to_bytes

from msgspec.structs import force_setattr, replace

from turnkit.errors import InvalidMessageError
from turnkit.messages._checks import (
    IMAGE_MEDIA_TYPES,
    check_json_object,
    clean_str,
    kind_of,
    need_choice,
    need_str,
)
from turnkit.messages._json import thaw
from turnkit.messages._wire import from_wire
from turnkit.messages.blocks import (
    BLOCK_TYPES,
    Base64Source,
    Block,
    FileBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
    _Frozen,
)

__all__ = ["Message", "MessageType", "Origin", "Role"]

Role = Literal["system", "user", "assistant"]
MessageType = Literal["standard", "compaction", "branch_summary", "custom"]

ROLES: tuple[str, ...] = ("system", "user", "assistant")
MESSAGE_TYPES: tuple[str, ...] = ("standard", "compaction", "branch_summary", "custom")

_ALLOWED_BLOCKS: dict[str, frozenset[type]] = {
    "system": frozenset({TextBlock}),
    "user": frozenset({TextBlock, ImageBlock, FileBlock, ToolResultBlock}),
    "assistant": frozenset({TextBlock, ImageBlock, FileBlock, ThinkingBlock, ToolUseBlock}),
}


class Origin(_Frozen):
    """Who produced an assistant message: provider name and model id."""

    provider: str
    model: str

    def __post_init__(self) -> None:
        if not clean_str(self.provider) or not self.provider:
            force_setattr(self, "provider", need_str(self.provider, "provider", non_empty=True))
        if not clean_str(self.model) or not self.model:
            force_setattr(self, "model", need_str(self.model, "model", non_empty=True))

    def to_dict(self) -> dict[str, str]:
        return {"provider": self.provider, "model": self.model}


class Message(_Frozen):
    """One turn of a conversation. Immutable; compares by value.

    >>> m = Message.user("What is in this picture?")
    >>> m.to_dict()
    {'role': 'user', 'content': [{'type': 'text', 'text': 'What is in this picture?'}]}
    >>> Message.from_dict(m.to_dict()) == m
    True
    """

    role: Role
    content: tuple[Block, ...]
    type: MessageType = "standard"
    id: str | None = None
    metadata: Any = None
    origin: Origin | None = None
    invocation_id: str | None = None

    def __post_init__(self) -> None:
        role = self.role
        allowed = _ALLOWED_BLOCKS.get(role) if type(role) is str else None
        if allowed is None:
            role = _role(role)
            force_setattr(self, "role", role)
            allowed = _ALLOWED_BLOCKS[role]
        content = self.content
        if type(content) is tuple:
            calls = 0  # a loop, not sets of types: type() of one object is the fastest call
            for block in content:
                kind = type(block)
                if kind not in allowed:
                    if not all(issubclass(type(part), BLOCK_TYPES) for part in content):
                        content = _content_from(content)
                        force_setattr(self, "content", content)
                    _check_placement(content, role)
                    break
                if kind is ToolUseBlock:
                    calls += 1
            else:
                if calls > 1:
                    _check_unique_ids(content)
        else:
            content = _content_from(content)
            force_setattr(self, "content", content)
            _check_placement(content, role)
        if self.type != "standard" or type(self.type) is not str:
            force_setattr(self, "type", need_choice(self.type, "type", MESSAGE_TYPES))
        if self.id is not None and not (type(self.id) is str and self.id.isascii()):
            force_setattr(self, "id", need_str(self.id, "id"))
        if self.metadata is not None:
            force_setattr(self, "metadata", check_json_object(self.metadata, "metadata"))
        if self.origin is not None and not issubclass(type(self.origin), Origin):
            force_setattr(self, "origin", from_wire(self.origin, Origin, "origin"))
        if self.invocation_id is not None and not clean_str(self.invocation_id):
            force_setattr(self, "invocation_id", need_str(self.invocation_id, "invocation_id"))

    # -- wire form ---------------------------------------------------------

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Build a message from its wire dict (see :meth:`to_dict`)."""
        if not issubclass(type(data), Mapping):
            raise InvalidMessageError("", f"expected a message object, got {kind_of(data)}")
        if not issubclass(type(data), dict):
            try:
                data = dict(data)
            except Exception as err:
                problem = f"the mapping could not be read ({type(err).__name__})"
                raise InvalidMessageError("", problem) from None
        return from_wire(data, cls, "", messages=True)

    def to_dict(self) -> dict[str, Any]:
        """The wire dict: plain, mutable, optional fields omitted at their default."""
        out: dict[str, Any] = {"role": self.role, "content": [b.to_dict() for b in self.content]}
        if self.type != "standard":
            out["type"] = self.type
        if self.id is not None:
            out["id"] = self.id
        if self.metadata is not None:
            out["metadata"] = thaw(self.metadata)
        if self.origin is not None:
            out["origin"] = self.origin.to_dict()
        if self.invocation_id is not None:
            out["invocation_id"] = self.invocation_id
        return out

    # -- builders ------------------------------------------------------------

    @classmethod
    def user(cls, *parts: str | Block | Mapping[str, Any], **fields: Any) -> Message:
        """A user message; str parts become text blocks."""
        return cls("user", _parts(parts), **fields)

    @classmethod
    def assistant(cls, *parts: str | Block | Mapping[str, Any], **fields: Any) -> Message:
        """An assistant message; str parts become text blocks."""
        return cls("assistant", _parts(parts), **fields)

    @classmethod
    def system(cls, text: str, **fields: Any) -> Message:
        """A system message holding one text block."""
        return cls("system", (_text_part(text, 0),), **fields)

    def clone(self, **changes: Any) -> Message:
        """A copy with ``changes`` applied, checked like a new message."""
        return replace(self, **changes) if changes else self

    def append_image_url_block(self, url: str) -> Message:
        """A copy with an image block for ``url`` appended.

        An empty url returns this message unchanged; a ``data:`` URL becomes a
        base64 source; anything else must be an absolute http(s) URL.
        """
        if not issubclass(type(url), str):
            raise InvalidMessageError("url", f"expected a URL string, got {kind_of(url)}")
        url = need_str(url, "url")
        if not url:
            return self
        source = _data_url_source(url) if url.startswith("data:") else UrlSource(url)
        return self.clone(content=(*self.content, ImageBlock(source)))

    @property
    def text(self) -> str:
        """The text blocks joined with "" (thinking and tool blocks left out)."""
        return "".join(b.text for b in self.content if type(b) is TextBlock)


def stamped(message: Message, **fields: Any) -> Message:
    """A copy of ``message`` with ``fields`` set, not checked again.

    For what turnkit sets on a message it already holds (an ``Origin`` it
    built, an invocation id it made), which cannot make the message invalid:
    :meth:`Message.clone` would check every block again.
    """
    copy = message.__copy__()
    for name, value in fields.items():
        force_setattr(copy, name, value)
    return copy


def _content_from(value: object) -> tuple[Block, ...]:
    if issubclass(type(value), str):
        problem = "expected a list of content blocks, got a string (use a text block)"
        raise InvalidMessageError("content", problem)
    if not issubclass(type(value), (list, tuple)):
        problem = f"expected a list of content blocks, got {kind_of(value)}"
        raise InvalidMessageError("content", problem)
    return from_wire(value, tuple[Block, ...], "content")


def _check_placement(content: tuple[Block, ...], role: str) -> None:
    allowed = tuple(_ALLOWED_BLOCKS[role])
    for index, block in enumerate(content):
        if not issubclass(type(block), allowed):
            kind = block.type
            problem = f"{_a(kind)} {kind} block is not allowed in {_a(role)} {role} message"
            raise InvalidMessageError(f"content[{index}]", problem)
    _check_unique_ids(content)


def _a(word: str) -> str:
    """The article for a role or block type ("an image", "a user")."""
    return "an" if word in ("assistant", "image") else "a"


def _check_unique_ids(content: tuple[Block, ...]) -> None:
    ids = [block.id for block in content if type(block) is ToolUseBlock]
    if len(ids) < 2 or len(set(ids)) == len(ids):
        return
    tool_ids: set[str] = set()
    for index, block in enumerate(content):
        if type(block) is ToolUseBlock:
            if block.id in tool_ids:
                problem = f"duplicate tool_use id {block.id!r}"
                raise InvalidMessageError(f"content[{index}].id", problem)
            tool_ids.add(block.id)


def _role(value: object) -> str:
    if issubclass(type(value), str):
        role = need_str(value, "role")
        if role in ROLES:
            return role
        shown = repr(role if len(role) <= 40 else role[:37] + "...")
    else:
        shown = kind_of(value)
    raise InvalidMessageError("role", f"unknown role {shown} (use system, user or assistant)")


def _parts(parts: tuple[object, ...]) -> tuple[object, ...]:
    return tuple(
        _text_part(part, index) if issubclass(type(part), str) else part
        for index, part in enumerate(parts)
    )


def _text_part(text: object, index: int) -> TextBlock:
    """A text block for a builder's argument; errors name ``content[index]``."""
    try:
        return TextBlock(text)  # type: ignore[arg-type]
    except InvalidMessageError as err:
        raise err.within(f"content[{index}]") from None


def _data_url_source(url: str) -> Base64Source:
    """``data:image/png;base64,...`` (or percent-encoded data) as a base64 source.

    Unpadded or non-canonical base64 is re-encoded; errors name ``url``.
    """
    header, comma, payload = url[5:].partition(",")
    params = header.split(";")
    media_type = params[0].lower() or "text/plain"
    if not comma:
        raise InvalidMessageError("url", "malformed data: URL (no comma before the data)")
    if media_type not in IMAGE_MEDIA_TYPES:
        allowed = ", ".join(sorted(IMAGE_MEDIA_TYPES))
        problem = f"unsupported image type {media_type!r} in data: URL (use {allowed})"
        raise InvalidMessageError("url", problem)
    is_base64 = "base64" in params[1:]
    if is_base64 and "%" not in payload:
        try:
            return Base64Source(media_type, payload)
        except InvalidMessageError:
            pass  # perhaps valid but not canonical (unpadded): re-encoded below
    try:
        raw = unquote_to_bytes(payload)
        if is_base64:
            raw = base64.b64decode(raw + b"=" * (-len(raw) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidMessageError("url", "data: URL holds invalid base64") from None
    if not raw:
        raise InvalidMessageError("url", "data: URL holds no data")
    return Base64Source(media_type, base64.b64encode(raw).decode("ascii"))
