"""OpenAI Chat Completions transcripts: ``from_openai_chat`` / ``to_openai_chat``.

The transcript is the ``messages`` list the API takes (and the style many
agent libraries store): ``system``/``developer``, ``user`` (a string or
parts), ``assistant`` (``content``, ``tool_calls``, and the
``reasoning_content`` or ``reasoning`` field of compatible reasoning
servers) and ``tool`` (``tool_call_id``, ``content``).

Normalisations (``from_openai_chat(to_openai_chat(h)) == h`` up to these):

- Consecutive ``tool`` messages become one user message of tool results; a
  turnkit user message holding results and other blocks is exported as the
  ``tool`` messages then a user message, so it comes back as two.
- ``tool_result.is_error`` has no Chat field: the content is exported as it
  is and comes back with ``is_error`` false.
- Text ``cache`` marks have no Chat field (Chat caches prefixes by itself).
- In an assistant message, reasoning comes first, then text, then calls.
- ``developer`` messages come back as system messages; a ``refusal`` comes
  back as text; an assistant ``content`` of ``""`` or null gives no block.
- Tool-call ids are kept exactly as they are (no mapping), as are the other
  turnkit fields a transcript has no place for (``id``, ``metadata``,
  ``invocation_id``), which are not exported.

Thinking: reasoning of a compatible server (a thinking block whose
``signature`` is the field name, as the Chat provider writes it) goes back
in that field; other thinking is refused, or sent as text, or left out
(``thinking="keep"|"text"|"drop"``). Images and files inside tool results,
files by URL and images in assistant turns have no Chat form: they raise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from turnkit.errors import InvalidMessageError
from turnkit.messages._json import thaw
from turnkit.messages.blocks import (
    Base64Source,
    Block,
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
    data_url,
    exportable,
    foreign_reason,
    json_object,
    need_keys,
    need_list,
    need_object,
    need_text,
    origin_for,
    parse_data_url,
    thinking_fallback,
)
from turnkit.messages.message import Message

__all__ = ["REASONING_FIELDS", "chat_user_part", "from_openai_chat", "to_openai_chat"]

PROVIDER = "openai"
FORMAT = "OpenAI Chat"
REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where compatible servers put reasoning text; the field name is the thinking's signature."""

_KEYS = {
    "system": frozenset({"role", "content"}),
    "developer": frozenset({"role", "content"}),
    "user": frozenset({"role", "content"}),
    "assistant": frozenset({"role", "content", "tool_calls", "refusal", *REASONING_FIELDS}),
    "tool": frozenset({"role", "content", "tool_call_id", "name"}),
}


# -- import --------------------------------------------------------------------


def from_openai_chat(messages: object, *, model: str | None = None) -> list[Message]:
    """Chat Completions ``messages`` as validated turnkit messages.

    ``model`` (e.g. ``"gpt-4.1"``) records who wrote the assistant turns
    (their ``origin`` becomes ``openai:<model>``), so that their reasoning is
    replayed natively to that model only. Raises
    :class:`~turnkit.InvalidMessageError` naming the place of anything that
    cannot be represented (``messages[3].content[1].type: ...``).

    >>> from_openai_chat([{"role": "user", "content": "Hi"}])[0].to_dict()
    {'role': 'user', 'content': [{'type': 'text', 'text': 'Hi'}]}
    """
    items = need_list(messages, "messages")
    out = Collector(origin_for(PROVIDER, model))
    results: list[Block] = []
    results_at = ""
    for index, raw in enumerate(items):
        path = f"messages[{index}]"
        item = need_object(raw, path)
        role = item.get("role")
        if role not in _KEYS:
            problem = f"unknown role {role!r} (use system, developer, user, assistant or tool)"
            raise InvalidMessageError(f"{path}.role", problem)
        need_keys(
            item, path, _KEYS[role], required=("content",) * (role != "assistant"), fmt=FORMAT
        )
        if role == "tool":
            results_at = results_at or path
            results.append(_tool_result(item, path))
            continue
        if results:
            out.add("user", results, results_at)
            results, results_at = [], ""
        if role == "assistant":
            out.add("assistant", _assistant_blocks(item, path, out), path)
        else:
            kind = "system" if role in ("system", "developer") else "user"
            out.add(kind, _content_blocks(item["content"], f"{path}.content", kind), path)
    if results:
        out.add("user", results, results_at)
    return out.result()


def _tool_result(item: Mapping[str, Any], path: str) -> ToolResultBlock:
    call_id = need_text(item.get("tool_call_id"), f"{path}.tool_call_id")
    content = item["content"]
    value: Any = (
        content if isinstance(content, str) else _content_blocks(content, f"{path}.content", "tool")
    )
    with at(path):
        return ToolResultBlock(call_id, value)


def _content_blocks(content: object, path: str, role: str) -> list[Block]:
    if isinstance(content, str):
        return [TextBlock(content)]
    blocks = []
    for index, raw in enumerate(need_list(content, path)):
        blocks.append(_part(need_object(raw, f"{path}[{index}]"), f"{path}[{index}]", role))
    return blocks


def _part(part: Mapping[str, Any], path: str, role: str) -> Block:
    kind = part.get("type")
    allowed = ("text", "image_url", "file") if role == "user" else ("text",)
    if role == "assistant":
        allowed = ("text", "refusal")
    if kind not in allowed:
        listing = ", ".join(allowed)
        problem = f"turnkit cannot represent a {kind!r} part here (it takes {listing})"
        raise InvalidMessageError(f"{path}.type", problem)
    if kind == "text":
        need_keys(part, path, {"type", "text"}, required=("text",), fmt=FORMAT)
        return TextBlock(need_text(part["text"], f"{path}.text"))
    if kind == "refusal":
        need_keys(part, path, {"type", "refusal"}, required=("refusal",), fmt=FORMAT)
        return TextBlock(need_text(part["refusal"], f"{path}.refusal"))
    if kind == "image_url":
        need_keys(part, path, {"type", "image_url"}, required=("image_url",), fmt=FORMAT)
        return _image(need_object(part["image_url"], f"{path}.image_url"), f"{path}.image_url")
    need_keys(part, path, {"type", "file"}, required=("file",), fmt=FORMAT)
    return _file(need_object(part["file"], f"{path}.file"), f"{path}.file")


def _image(image: Mapping[str, Any], path: str) -> ImageBlock:
    need_keys(image, path, {"url", "detail"}, required=("url",), fmt=FORMAT)
    if image.get("detail", "auto") != "auto":
        problem = f"turnkit images have no detail setting (only 'auto'), got {image['detail']!r}"
        raise InvalidMessageError(f"{path}.detail", problem)
    url = need_text(image["url"], f"{path}.url")
    with at(path):
        if url.startswith("data:"):
            return ImageBlock(parse_data_url(url, "url"))
        return ImageBlock(UrlSource(url))


def _file(file: Mapping[str, Any], path: str) -> FileBlock:
    if "file_id" in file:
        problem = "an uploaded file id cannot be represented (give file_data)"
        raise InvalidMessageError(f"{path}.file_id", problem)
    need_keys(file, path, {"filename", "file_data"}, required=("filename", "file_data"), fmt=FORMAT)
    filename = need_text(file["filename"], f"{path}.filename")
    source = parse_data_url(need_text(file["file_data"], f"{path}.file_data"), f"{path}.file_data")
    with at(path):
        return FileBlock(source, filename)


def _assistant_blocks(item: Mapping[str, Any], path: str, out: Collector) -> list[Block]:
    blocks: list[Block] = []
    for name in REASONING_FIELDS:
        reasoning = item.get(name)
        if reasoning is not None and need_text(reasoning, f"{path}.{name}"):
            blocks.append(ThinkingBlock(reasoning, name))
    content = item.get("content")
    if content is not None and content != "":
        blocks += _content_blocks(content, f"{path}.content", "assistant")
    refusal = item.get("refusal")
    if refusal is not None and need_text(refusal, f"{path}.refusal"):
        blocks.append(TextBlock(refusal))
    for index, raw in enumerate(need_list(item.get("tool_calls") or [], f"{path}.tool_calls")):
        where = f"{path}.tool_calls[{index}]"
        blocks.append(_call(need_object(raw, where), out, where))
    return blocks


def _call(call: Mapping[str, Any], out: Collector, path: str) -> ToolUseBlock:
    need_keys(call, path, {"id", "type", "function"}, required=("id", "function"), fmt=FORMAT)
    if call.get("type", "function") != "function":
        problem = f"only function tool calls can be represented, got {call['type']!r}"
        raise InvalidMessageError(f"{path}.type", problem)
    function = need_object(call["function"], f"{path}.function")
    need_keys(function, f"{path}.function", {"name", "arguments"}, required=("name",), fmt=FORMAT)
    arguments = json_object(function.get("arguments", "{}"), f"{path}.function.arguments")
    call_id = out.call_id(call["id"], f"{path}.id")
    with at(path):
        return ToolUseBlock(call_id, need_text(function["name"], "function.name"), arguments)


# -- export --------------------------------------------------------------------


def to_openai_chat(messages: object, *, thinking: ThinkingExport = "keep") -> list[dict[str, Any]]:
    """turnkit messages (dicts or objects) as a Chat Completions ``messages`` list.

    Tool results become ``tool`` messages ahead of the rest of their user
    message. ``thinking`` says what happens to thinking Chat cannot carry
    (see the module docs). Raises :class:`~turnkit.InvalidMessageError`
    naming the block that has no Chat form.
    """
    check_mode(thinking)
    wire: list[dict[str, Any]] = []
    for index, message in enumerate(exportable(messages)):
        path = f"messages[{index}]"
        if message.role == "assistant":
            wire.append(_assistant(message, path, thinking))
            continue
        parts = []
        for position, block in enumerate(message.content):
            where = f"{path}.content[{position}]"
            if isinstance(block, ToolResultBlock):
                wire.append(_tool_message(block, where))
            else:
                parts.append(_user_part(block, where))
        if parts or not message.content:
            wire.append({"role": message.role, "content": _compact(parts)})
    return wire


def _compact(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """One text part as a plain string, as most transcripts have it."""
    if len(parts) == 1 and parts[0]["type"] == "text":
        return parts[0]["text"]
    return parts


def _tool_message(block: ToolResultBlock, path: str) -> dict[str, Any]:
    content: Any = block.content
    if not isinstance(content, str):
        for position, part in enumerate(content):
            if not isinstance(part, TextBlock):
                problem = f"a Chat tool message holds text only, not {part.type}"
                raise InvalidMessageError(f"{path}.content[{position}]", problem)
        content = [{"type": "text", "text": part.text} for part in content]  # type: ignore[union-attr]
    return {"role": "tool", "tool_call_id": block.tool_use_id, "content": content}


def chat_user_part(block: Block) -> dict[str, Any] | None:
    """A text, image or inline file block as a Chat user content part (None:
    Chat has no form for it, e.g. a file by URL). The Chat provider uses it too."""
    if isinstance(block, TextBlock):
        return {"type": "text", "text": block.text}
    if isinstance(block, ImageBlock):
        source = block.source
        url = data_url(source) if isinstance(source, Base64Source) else source.url
        return {"type": "image_url", "image_url": {"url": url}}
    if isinstance(block, FileBlock) and isinstance(block.source, Base64Source):
        file = {"filename": block.filename, "file_data": data_url(block.source)}
        return {"type": "file", "file": file}
    return None


def _user_part(block: Block, path: str) -> dict[str, Any]:
    part = chat_user_part(block)
    if part is None:
        raise InvalidMessageError(path, "Chat takes files inline (base64) only, not by URL")
    return part


def _assistant(message: Message, path: str, mode: ThinkingExport) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: dict[str, list[str]] = {}
    for position, block in enumerate(message.content):
        where = f"{path}.content[{position}]"
        if isinstance(block, ThinkingBlock):
            if block.signature in REASONING_FIELDS and not block.redacted:
                reasoning.setdefault(block.signature, []).append(block.thinking)
                continue
            reason = foreign_reason(message, block, PROVIDER, FORMAT)
            block = thinking_fallback(block, mode, where, reason)  # type: ignore[assignment]
            if block is None:
                continue
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            arguments = json.dumps(thaw(block.input))
            function = {"name": block.name, "arguments": arguments}
            calls.append({"id": block.id, "type": "function", "function": function})
        else:
            problem = f"Chat takes {block.type} blocks only in user messages"
            raise InvalidMessageError(where, problem)
    out: dict[str, Any] = {"role": "assistant"}
    for name, parts in reasoning.items():
        out[name] = "\n".join(parts)
    if len(texts) > 1:
        out["content"] = [{"type": "text", "text": text} for text in texts]
    else:
        out["content"] = texts[0] if texts else (None if calls else "")
    if calls:
        out["tool_calls"] = calls
    return out
