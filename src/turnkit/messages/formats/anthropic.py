"""Anthropic Messages transcripts: ``from_anthropic`` / ``to_anthropic``.

The transcript is ``{"system"?: str | [text blocks], "messages": [...]}`` as
the Messages API takes it. Anthropic blocks are close to turnkit's: text
(``cache_control`` becomes ``cache``), image, document (a file), thinking
and redacted_thinking (a thinking block with ``redacted=True`` whose
``signature`` holds the data), tool_use and tool_result.

Normalisations (``from_anthropic(to_anthropic(h)) == h`` up to these):

- All system text becomes one leading system message (a string when it is
  one text block without a cache mark, else a list of text blocks).
- Text blocks with no visible text are left out: the API refuses them.
- A URL image's ``media_type`` is not sent (the API has no field for it);
  a URL document comes back as ``application/pdf`` (the only kind the API
  takes by URL); a text document comes back as UTF-8 ``text/plain``.
- A document without a ``title`` is named ``document.pdf`` or
  ``document.txt``.
- An error ``tool_result`` (``is_error: true``) whose content is a list of
  text blocks comes in as their text joined with newlines (turnkit keeps an
  error result as a string) and goes out as that string; one holding an
  image or a document is refused.
- turnkit fields a transcript has no place for (``id``, ``metadata``,
  ``origin``, ``invocation_id``) are not exported; ``from_anthropic(...,
  model=...)`` sets ``origin`` on the assistant turns.

Thinking goes natively when it is signed and not written by another
provider; otherwise ``thinking="keep"`` raises, ``"text"`` sends it as
text and ``"drop"`` leaves it out.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from turnkit.errors import InvalidMessageError
from turnkit.messages._json import thaw
from turnkit.messages.blocks import (
    Base64Source,
    Block,
    CacheControl,
    FileBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
)
from turnkit.messages.formats._common import (
    Collector,
    ThinkingExport,
    at,
    check_mode,
    exportable,
    foreign_reason,
    native_origin,
    need_keys,
    need_list,
    need_object,
    need_text,
    origin_for,
    thinking_fallback,
)
from turnkit.messages.message import Message

__all__ = ["from_anthropic", "to_anthropic"]

PROVIDER = "anthropic"
FORMAT = "Anthropic"
_KEYS: dict[str, frozenset[str]] = {
    "text": frozenset({"type", "text", "cache_control", "citations"}),
    "image": frozenset({"type", "source"}),
    "document": frozenset({"type", "source", "title"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "redacted_thinking": frozenset({"type", "data"}),
    "tool_use": frozenset({"type", "id", "name", "input"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error"}),
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "image": ("source",),
    "document": ("source",),
    "thinking": ("thinking",),
    "redacted_thinking": ("data",),
    "tool_use": ("id", "name", "input"),
    "tool_result": ("tool_use_id",),
}


# -- import --------------------------------------------------------------------


def from_anthropic(transcript: object, *, model: str | None = None) -> list[Message]:
    """``{"system"?, "messages"}`` as validated turnkit messages.

    ``model`` (e.g. ``"claude-sonnet-4-5"``) records who wrote the assistant
    turns (``origin`` ``anthropic:<model>``), so their signed thinking is
    replayed natively to that model only. Raises
    :class:`~turnkit.InvalidMessageError` naming the place of anything that
    cannot be represented.

    >>> [m.role for m in from_anthropic({"system": "Be brief.", "messages": [
    ...     {"role": "user", "content": "Hi"}]})]
    ['system', 'user']
    """
    data = need_object(transcript, "transcript")
    need_keys(data, "transcript", {"system", "messages"}, required=("messages",), fmt=FORMAT)
    out = Collector(origin_for(PROVIDER, model))
    if data.get("system") is not None:
        system = data["system"]
        blocks = [TextBlock(system)] if isinstance(system, str) else _blocks(system, "system")
        if not all(isinstance(b, TextBlock) for b in blocks):
            raise InvalidMessageError("system", "the system prompt holds text blocks only")
        out.add("system", blocks, "system")
    for index, raw in enumerate(need_list(data["messages"], "messages")):
        path = f"messages[{index}]"
        item = need_object(raw, path)
        need_keys(item, path, {"role", "content"}, required=("role", "content"), fmt=FORMAT)
        if item["role"] not in ("user", "assistant"):
            problem = f"unknown role {item['role']!r} (use user or assistant)"
            raise InvalidMessageError(f"{path}.role", problem)
        content = item["content"]
        blocks = (
            [TextBlock(content)]
            if isinstance(content, str)
            else _blocks(content, f"{path}.content", out)
        )
        out.add(item["role"], blocks, path)
    return out.result()


def _blocks(value: object, path: str, out: Collector | None = None) -> list[Block]:
    return [
        _block(need_object(raw, f"{path}[{index}]"), f"{path}[{index}]", out)
        for index, raw in enumerate(need_list(value, path))
    ]


def _block(block: Mapping[str, Any], path: str, out: Collector | None) -> Block:
    kind = block.get("type")
    if kind not in _KEYS:
        known = ", ".join(_KEYS)
        raise InvalidMessageError(f"{path}.type", f"turnkit cannot represent {kind!r} ({known})")
    need_keys(block, path, _KEYS[kind], required=_REQUIRED[kind], fmt=FORMAT)
    with at(path):
        if kind == "text":
            if block.get("citations"):
                raise InvalidMessageError("citations", "turnkit text has no citations")
            return TextBlock(block["text"], _cache(block.get("cache_control")))
        if kind == "image":
            source = need_object(block["source"], "source")
            return ImageBlock(_url(source) if source.get("type") == "url" else dict(source))
        if kind == "document":
            return _document(block)
        if kind == "thinking":
            return ThinkingBlock(block["thinking"], block.get("signature") or None)
        if kind == "redacted_thinking":
            return ThinkingBlock("", need_text(block["data"], "data"), redacted=True)
        if kind == "tool_use":
            call_id = out.call_id(block["id"], "id") if out else block["id"]
            return ToolUseBlock(call_id, block["name"], block["input"])
    return _tool_result(block, path)


def _cache(value: object) -> CacheControl | None:
    if value is None:
        return None
    mark = need_object(value, "cache_control")
    need_keys(mark, "cache_control", {"type", "ttl"}, fmt=FORMAT)
    if mark.get("type", "ephemeral") != "ephemeral":
        raise InvalidMessageError("cache_control.type", f"unknown cache type {mark['type']!r}")
    return CacheControl(mark.get("ttl"))


def _url(source: Mapping[str, Any]) -> UrlSource:
    need_keys(source, "source", {"type", "url"}, required=("url",), fmt=FORMAT)
    return UrlSource(source["url"])


def _document(block: Mapping[str, Any]) -> FileBlock:
    source = need_object(block["source"], "source")
    title = block.get("title")
    kind = source.get("type")
    if kind == "text":
        need_keys(source, "source", {"type", "media_type", "data"}, required=("data",), fmt=FORMAT)
        data = base64.b64encode(need_text(source["data"], "source.data").encode()).decode()
        return FileBlock(Base64Source("text/plain", data), title or "document.txt")
    if kind == "url":
        need_keys(source, "source", {"type", "url"}, required=("url",), fmt=FORMAT)
        return FileBlock(UrlSource(source["url"], "application/pdf"), title or "document.pdf")
    if kind != "base64":
        problem = f"turnkit cannot represent a {kind!r} document source (base64, text or url)"
        raise InvalidMessageError("source.type", problem)
    return FileBlock(dict(source), title or "document.pdf")


def _tool_result(block: Mapping[str, Any], path: str) -> ToolResultBlock:
    content = block.get("content", "")
    parts: Any = content if isinstance(content, str) else _blocks(content, f"{path}.content")
    is_error = block.get("is_error", False)
    if is_error is True and not isinstance(parts, str):
        parts = _error_text(parts, f"{path}.content")
    with at(path):
        return ToolResultBlock(block["tool_use_id"], parts, is_error)


def _error_text(parts: list[Block], path: str) -> str:
    """An error result's text blocks as the one string turnkit keeps for it
    (joined with newlines); anything else in it cannot be kept."""
    for index, part in enumerate(parts):
        where = f"{path}[{index}]"
        if not isinstance(part, TextBlock):
            problem = (
                f"an error tool_result (is_error: true) holds text only in turnkit, "
                f"not {'an' if part.type[0] in 'aeiou' else 'a'} {part.type} block"
            )
            raise InvalidMessageError(where, problem)
        if part.cache is not None:
            problem = "an error tool_result's text becomes one string, which has no cache mark"
            raise InvalidMessageError(f"{where}.cache_control", problem)
    return "\n".join(part.text for part in parts)  # type: ignore[union-attr]


# -- export --------------------------------------------------------------------


def to_anthropic(messages: object, *, thinking: ThinkingExport = "keep") -> dict[str, Any]:
    """turnkit messages as ``{"system"?, "messages"}`` for the Messages API.

    ``thinking`` says what happens to thinking Anthropic cannot verify (see
    the module docs). Raises :class:`~turnkit.InvalidMessageError` naming
    the block that has no Anthropic form.
    """
    check_mode(thinking)
    system: list[TextBlock] = []
    wire: list[dict[str, Any]] = []
    for index, message in enumerate(exportable(messages)):
        path = f"messages[{index}]"
        if message.role == "system":
            system += [b for b in message.content if isinstance(b, TextBlock)]
            continue
        content = []
        for position, block in enumerate(message.content):
            where = f"{path}.content[{position}]"
            if isinstance(block, ThinkingBlock):
                block = _thinking(message, block, where, thinking)  # type: ignore[assignment]
            if block is not None and (part := _export(block, where)) is not None:
                content.append(part)
        if not content:
            raise InvalidMessageError(f"{path}.content", "Anthropic takes no empty message")
        wire.append({"role": message.role, "content": content})
    out: dict[str, Any] = {}
    if len(system) == 1 and system[0].cache is None:
        out["system"] = system[0].text
    elif system:
        out["system"] = [_text(b) for b in system]
    out["messages"] = wire
    return out


def _thinking(
    message: Message, block: ThinkingBlock, path: str, mode: ThinkingExport
) -> ThinkingBlock | TextBlock | None:
    if block.signature and native_origin(message, PROVIDER):
        return block
    return thinking_fallback(block, mode, path, foreign_reason(message, block, PROVIDER, FORMAT))


def _text(block: TextBlock) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "text", "text": block.text}
    if block.cache is not None:
        out["cache_control"] = {"type": "ephemeral", **block.cache.to_dict()}
    return out


def _export(block: Block, path: str) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return _text(block) if block.text.strip() else None
    if isinstance(block, ImageBlock):
        source = block.source
        if isinstance(source, UrlSource):
            return {"type": "image", "source": {"type": "url", "url": source.url}}
        return {"type": "image", "source": source.to_dict()}
    if isinstance(block, FileBlock):
        return _export_document(block, path)
    if isinstance(block, ThinkingBlock):
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.signature}
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": thaw(block.input)}
    content: Any = block.content
    if not isinstance(content, str):
        parts = (_export(part, f"{path}.content[{i}]") for i, part in enumerate(content))
        content = [part for part in parts if part is not None]
    out = {"type": "tool_result", "tool_use_id": block.tool_use_id, "content": content}
    return {**out, "is_error": True} if block.is_error else out


def _export_document(block: FileBlock, path: str) -> dict[str, Any]:
    source = block.source
    media_type = source.media_type or "application/pdf"
    wire: dict[str, Any] | None = None
    if media_type == "application/pdf":
        wire = source.to_dict() if isinstance(source, Base64Source) else _pdf_url(source)
    elif media_type == "text/plain" and isinstance(source, Base64Source):
        try:
            text = base64.b64decode(source.data).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidMessageError(path, "a text/plain document must be UTF-8") from None
        wire = {"type": "text", "media_type": "text/plain", "data": text}
    if wire is None:
        problem = f"Anthropic takes PDF and plain-text documents, not {media_type}"
        raise InvalidMessageError(path, problem)
    return {"type": "document", "source": wire, "title": block.filename}


def _pdf_url(source: UrlSource) -> dict[str, Any]:
    return {"type": "url", "url": source.url}
