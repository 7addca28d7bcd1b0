"""Gemini transcripts: ``from_gemini`` / ``to_gemini``.

The transcript is ``{"system_instruction"?, "contents"}`` as
``generate_content`` takes it. Export writes the Python SDK's snake_case
keys; import also reads the REST API's camelCase (``functionCall``,
``thoughtSignature``, ``inlineData``, ...).

Thought signatures are kept as the Gemini provider keeps them: a thought
part is a thinking block with its text and signature; a signature on any
other part (a call, text) is an empty, signed thinking block right before
that block. On export every call without a signature of its own gets the
documented placeholder ``skip_thought_signature_validator``, which import
reads as no signature. Thinking written by another provider, or unsigned,
is refused, sent as text, or left out (``thinking="keep"|"text"|"drop"``).

Normalisations (``from_gemini(to_gemini(h)) == h`` up to these):

- Consecutive messages of one role become one content (Gemini wants turns
  to alternate); all system text becomes one leading system message.
- A tool result goes as ``{"result": text}`` (``{"error": text}`` when
  ``is_error``); text parts are joined with "\\n" and come back as a string.
  A response of any other shape comes back as its JSON text.
- Gemini parts have no file name: inline files come back named ``file``;
  inline data of an image type comes back as an image block.
- Empty text blocks and messages left without parts are not exported.
- Calls imported without an id get ``call_<content>_<part>``; a response
  without an id answers the first unanswered call of that name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from turnkit.errors import InvalidMessageError
from turnkit.messages._checks import IMAGE_MEDIA_TYPES
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

__all__ = ["SKIP_SIGNATURE", "from_gemini", "to_gemini"]

PROVIDER = "gemini"
FORMAT = "Gemini"
SKIP_SIGNATURE = "skip_thought_signature_validator"
"""Gemini's documented placeholder for calls whose signature is unknown."""

_CAMEL = {
    "systemInstruction": "system_instruction",
    "thoughtSignature": "thought_signature",
    "functionCall": "function_call",
    "functionResponse": "function_response",
    "inlineData": "inline_data",
    "fileData": "file_data",
    "mimeType": "mime_type",
    "fileUri": "file_uri",
}
_PART_KEYS = frozenset(
    {"text", "thought", "thought_signature", "function_call", "function_response"}
    | {"inline_data", "file_data"}
)


def _snake(obj: Mapping[str, Any], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        name = _CAMEL.get(key, key)
        if name in out:
            raise InvalidMessageError(f"{path}.{key}", f"given twice (as {name} too)")
        out[name] = value
    return out


# -- import --------------------------------------------------------------------


def from_gemini(transcript: object, *, model: str | None = None) -> list[Message]:
    """``{"system_instruction"?, "contents"}`` as validated turnkit messages.

    ``model`` records who wrote the ``model`` turns (``origin``
    ``gemini:<model>``), so their thought signatures go back to that model
    only. Raises :class:`~turnkit.InvalidMessageError` naming the place of
    anything that cannot be represented.
    """
    data = _snake(need_object(transcript, "transcript"), "transcript")
    need_keys(
        data, "transcript", {"system_instruction", "contents"}, required=("contents",), fmt=FORMAT
    )
    out = Collector(origin_for(PROVIDER, model))
    if data.get("system_instruction") is not None:
        out.add("system", _system(data["system_instruction"]), "system_instruction")
    calls: list[ToolUseBlock] = []  # the calls of the latest model turn, for unnamed responses
    for index, raw in enumerate(need_list(data["contents"], "contents")):
        path = f"contents[{index}]"
        content = _snake(need_object(raw, path), path)
        need_keys(content, path, {"role", "parts"}, required=("parts",), fmt=FORMAT)
        role = content.get("role", "user")
        if role not in ("user", "model"):
            raise InvalidMessageError(f"{path}.role", f"unknown role {role!r} (use user or model)")
        parts = need_list(content["parts"], f"{path}.parts")
        if role == "model":
            blocks = _model_blocks(parts, path, index, out)
            calls = [b for b in blocks if isinstance(b, ToolUseBlock)]
            out.add("assistant", blocks, path)
        else:
            out.add("user", _user_blocks(parts, path, calls), path)
    return out.result()


def _system(value: object) -> list[Block]:
    if isinstance(value, str):
        return [TextBlock(value)]
    content = _snake(need_object(value, "system_instruction"), "system_instruction")
    need_keys(content, "system_instruction", {"role", "parts"}, required=("parts",), fmt=FORMAT)
    blocks: list[Block] = []
    for index, raw in enumerate(need_list(content["parts"], "system_instruction.parts")):
        where = f"system_instruction.parts[{index}]"
        part = need_object(raw, where)
        need_keys(part, where, {"text"}, required=("text",), fmt=FORMAT)
        blocks.append(TextBlock(need_text(part["text"], f"{where}.text")))
    return blocks


def _part(raw: object, path: str) -> tuple[dict[str, Any], str | None]:
    """A part in snake_case, and its real signature (the placeholder is none)."""
    part = _snake(need_object(raw, path), path)
    need_keys(part, path, _PART_KEYS, fmt=FORMAT)
    signature = part.get("thought_signature")
    if signature is not None:
        need_text(signature, f"{path}.thought_signature")
    return part, (None if signature in (None, "", SKIP_SIGNATURE) else signature)


def _model_blocks(parts: Any, path: str, index: int, out: Collector) -> list[Block]:
    blocks: list[Block] = []
    for position, raw in enumerate(parts):
        where = f"{path}.parts[{position}]"
        part, signature = _part(raw, where)
        if part.get("thought"):
            text = need_text(part.get("text", ""), f"{where}.text")
            blocks.append(ThinkingBlock(text, signature))
            continue
        if signature:
            blocks.append(ThinkingBlock("", signature))
        if "function_call" in part:
            blocks.append(
                _call(part["function_call"], f"{where}.function_call", out, index, position)
            )
        else:
            blocks.append(_content_block(part, where))
    return blocks


def _call(raw: object, path: str, out: Collector, index: int, position: int) -> ToolUseBlock:
    call = need_object(raw, path)
    need_keys(call, path, {"id", "name", "args"}, required=("name",), fmt=FORMAT)
    call_id = out.call_id(call.get("id") or f"call_{index}_{position}", f"{path}.id")
    with at(path):
        return ToolUseBlock(call_id, need_text(call["name"], "name"), dict(call.get("args") or {}))


def _user_blocks(parts: Any, path: str, calls: list[ToolUseBlock]) -> list[Block]:
    blocks: list[Block] = []
    answered: set[str] = set()
    for position, raw in enumerate(parts):
        where = f"{path}.parts[{position}]"
        part, _ = _part(raw, where)
        if part.get("thought") or "function_call" in part:
            raise InvalidMessageError(where, "a user turn cannot hold thoughts or function calls")
        if "function_response" in part:
            result = _response(
                part["function_response"], f"{where}.function_response", calls, answered
            )
            blocks.append(result)
        else:
            blocks.append(_content_block(part, where))
    return blocks


def _response(
    raw: object, path: str, calls: list[ToolUseBlock], answered: set[str]
) -> ToolResultBlock:
    response = need_object(raw, path)
    need_keys(response, path, {"id", "name", "response"}, required=("name", "response"), fmt=FORMAT)
    name = need_text(response["name"], f"{path}.name")
    call_id = response.get("id")
    if not call_id:
        waiting = [c.id for c in calls if c.name == name and c.id not in answered]
        if not waiting:
            raise InvalidMessageError(f"{path}.name", f"no call of {name!r} to answer")
        call_id = waiting[0]
    answered.add(call_id)
    body = need_object(response["response"], f"{path}.response")
    keys = set(body)
    if keys == {"result"} and isinstance(body["result"], str):
        content, error = body["result"], False
    elif keys == {"error"} and isinstance(body["error"], str):
        content, error = body["error"], True
    else:
        content, error = json.dumps(thaw(dict(body))), False
    with at(path):
        return ToolResultBlock(need_text(call_id, "id"), content, error)


def _content_block(part: Mapping[str, Any], path: str) -> Block:
    if "text" in part:
        return TextBlock(need_text(part["text"], f"{path}.text"))
    for field in ("inline_data", "file_data"):
        if field in part:
            data = _snake(need_object(part[field], f"{path}.{field}"), f"{path}.{field}")
            return _media(data, field, f"{path}.{field}")
    raise InvalidMessageError(path, "an empty part (no text, data, call or response)")


def _media(data: Mapping[str, Any], field: str, path: str) -> Block:
    key = "data" if field == "inline_data" else "file_uri"
    need_keys(data, path, {"mime_type", key}, required=("mime_type", key), fmt=FORMAT)
    media_type = need_text(data["mime_type"], f"{path}.mime_type")
    with at(path):
        if field == "inline_data":
            source: Any = Base64Source(media_type, need_text(data["data"], "data"))
        else:
            uri = need_text(data["file_uri"], "file_uri")
            if not uri.startswith(("http://", "https://")):
                problem = "only http(s) file URIs can be represented (not gs:// or file ids)"
                raise InvalidMessageError("file_uri", problem)
            source = UrlSource(uri, media_type)
        if media_type in IMAGE_MEDIA_TYPES:
            return ImageBlock(source)
        return FileBlock(source, "file")


# -- export --------------------------------------------------------------------


def to_gemini(messages: object, *, thinking: ThinkingExport = "keep") -> dict[str, Any]:
    """turnkit messages as ``{"system_instruction"?, "contents"}`` for Gemini.

    ``thinking`` says what happens to thinking Gemini cannot verify (see the
    module docs). Raises :class:`~turnkit.InvalidMessageError` naming the
    block that has no Gemini form.
    """
    check_mode(thinking)
    history = exportable(messages)
    names = {b.id: b.name for m in history for b in m.content if isinstance(b, ToolUseBlock)}
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    for index, message in enumerate(history):
        path = f"messages[{index}]"
        if message.role == "system":
            system += [{"text": b.text} for b in message.content if isinstance(b, TextBlock)]
            continue
        role = "model" if message.role == "assistant" else "user"
        if role == "model":
            parts = _model_parts(message, path, thinking)
        else:
            parts = _user_parts(message, path, names)
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    out: dict[str, Any] = {"system_instruction": {"parts": system}} if system else {}
    out["contents"] = contents
    return out


def _model_parts(message: Message, path: str, mode: ThinkingExport) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    pending: tuple[str, ThinkingBlock] | None = None  # a signature for the next part
    own = native_origin(message, PROVIDER)
    for position, block in enumerate(message.content):
        where = f"{path}.content[{position}]"
        if isinstance(block, ThinkingBlock):
            _unplaced(pending, mode)
            pending = None
            if own and block.signature and not block.redacted and not block.thinking:
                pending = (where, block)
                continue
            if own and block.signature and not block.redacted:
                parts.append(
                    {"text": block.thinking, "thought": True, "thought_signature": block.signature}
                )
                continue
            reason = foreign_reason(message, block, PROVIDER, FORMAT)
            if (fallback := thinking_fallback(block, mode, where, reason)) is not None:
                parts.append({"text": fallback.text})
            continue
        part = _export_part(block, where)
        if part is None:
            continue
        if pending is not None:
            part["thought_signature"] = pending[1].signature
            pending = None
        elif "function_call" in part:
            part["thought_signature"] = SKIP_SIGNATURE
        parts.append(part)
    _unplaced(pending, mode)
    return parts


def _unplaced(pending: tuple[str, ThinkingBlock] | None, mode: ThinkingExport) -> None:
    """A bare signature with no part after it: refused, or left out (it has no text)."""
    if pending is not None:
        reason = f"{FORMAT} needs a part after a bare thought signature to carry it"
        thinking_fallback(pending[1], mode, pending[0], reason)


def _export_part(block: Block, path: str) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        return {"text": block.text} if block.text else None
    if isinstance(block, ToolUseBlock):
        return {"function_call": {"id": block.id, "name": block.name, "args": thaw(block.input)}}
    if isinstance(block, (ImageBlock, FileBlock)):
        source = block.source
        if isinstance(source, Base64Source):
            return {"inline_data": {"mime_type": source.media_type, "data": source.data}}
        if source.media_type:
            return {"file_data": {"mime_type": source.media_type, "file_uri": source.url}}
        raise InvalidMessageError(f"{path}.source", "Gemini needs the media_type of a URL source")
    raise InvalidMessageError(path, f"Gemini takes no {block.type} block here")


def _user_parts(message: Message, path: str, names: dict[str, str]) -> list[dict[str, Any]]:
    responses: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for position, block in enumerate(message.content):
        where = f"{path}.content[{position}]"
        if isinstance(block, ToolResultBlock):
            responses.append(_export_response(block, where, names))
        elif (part := _export_part(block, where)) is not None:
            others.append(part)
    return responses + others


def _export_response(block: ToolResultBlock, path: str, names: dict[str, str]) -> dict[str, Any]:
    if block.tool_use_id not in names:
        problem = "Gemini names each function response after its call, and this one has none"
        raise InvalidMessageError(f"{path}.tool_use_id", problem)
    if isinstance(block.content, str):
        text = block.content
    else:
        for position, part in enumerate(block.content):
            if not isinstance(part, TextBlock):
                problem = f"a Gemini function response holds text only, not {part.type}"
                raise InvalidMessageError(f"{path}.content[{position}]", problem)
        text = "\n".join(part.text for part in block.content)  # type: ignore[union-attr]
    key = "error" if block.is_error else "result"
    response = {"id": block.tool_use_id, "name": names[block.tool_use_id], "response": {key: text}}
    return {"function_response": response}
