"""MCP tool results as turnkit result content: text, images, and files.

- text -> a text block; image -> an image block (base64); audio -> a file
  block (``audio.<subtype>``).
- an embedded resource -> a file block named after the last part of its URI
  (text resources are encoded as UTF-8, with their media type or
  ``text/plain``; blobs keep theirs or ``application/octet-stream``).
- a resource link -> a text line naming it (``[resource] name: uri``): the
  content stays on the server.
- a result with no content but ``structuredContent`` -> its JSON text.

A result that is only text comes back as one string (parts joined with
"\\n"), as most tools' results are.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any
from urllib.parse import unquote, urlsplit

from turnkit.messages import Base64Source, FileBlock, ImageBlock, TextBlock

__all__ = ["error_text", "result_content"]


def result_content(result: Any) -> str | list[TextBlock | ImageBlock | FileBlock]:
    """What the model gets for a successful ``CallToolResult``."""
    parts = [_part(item) for item in result.content or ()]
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    if all(isinstance(part, TextBlock) for part in parts):
        return "\n".join(part.text for part in parts)  # type: ignore[union-attr]
    return parts


def error_text(result: Any) -> str:
    """The text of an error result (error results carry text only)."""
    texts = []
    for item in result.content or ():
        part = _part(item)
        texts.append(part.text if isinstance(part, TextBlock) else f"[{_describe(part)}]")
    return "\n".join(texts) or "the tool reported an error without a message"


def _part(item: Any) -> TextBlock | ImageBlock | FileBlock:
    kind = getattr(item, "type", None)
    if kind == "text":
        return TextBlock(item.text)
    if kind == "image":
        return ImageBlock(Base64Source(item.mime_type, _canonical(item.data)))
    if kind == "audio":
        subtype = item.mime_type.partition("/")[2] or "bin"
        return FileBlock(Base64Source(item.mime_type, _canonical(item.data)), f"audio.{subtype}")
    if kind == "resource":
        return _resource(item.resource)
    if kind == "resource_link":
        return TextBlock(f"[resource] {item.name}: {item.uri}")
    return TextBlock(f"[unsupported MCP content of type {kind!r}]")


def _resource(resource: Any) -> FileBlock:
    uri = str(resource.uri)
    name = unquote(urlsplit(uri).path.rstrip("/").rpartition("/")[2]) or uri
    text = getattr(resource, "text", None)
    if text is not None:
        data = base64.b64encode(text.encode()).decode()
        return FileBlock(Base64Source(resource.mime_type or "text/plain", data), name)
    media_type = resource.mime_type or "application/octet-stream"
    return FileBlock(Base64Source(media_type, _canonical(resource.blob)), name)


def _canonical(data: str) -> str:
    """Base64 as turnkit keeps it (padded, standard alphabet), from what servers send."""
    try:
        raw = base64.b64decode(data + "=" * (-len(data) % 4), altchars=b"-_")
    except (binascii.Error, ValueError):
        raw = base64.b64decode(data + "=" * (-len(data) % 4))
    return base64.b64encode(raw).decode()


def _describe(part: ImageBlock | FileBlock) -> str:
    source = part.source
    kind = "image" if isinstance(part, ImageBlock) else f"file {part.filename}"
    return f"{kind} ({source.media_type})"
