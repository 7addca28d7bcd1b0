"""OpenAI Responses transcripts: ``from_openai_responses`` / ``to_openai_responses``.

The transcript is a list of ``input`` items as the Responses API takes them
(output items of earlier responses included): ``message`` items (also the
bare ``{"role", "content"}`` form), ``function_call``,
``function_call_output`` and ``reasoning``.

Reasoning is kept as the Responses provider keeps it: a thinking block whose
``thinking`` is the summary (parts joined by a blank line) and whose
``signature`` is the JSON state of :func:`reasoning_signature` (the item id,
its ``encrypted_content``, and the type and id of the item that followed it,
which the API requires to follow it again). On export a reasoning item goes
right before the block that followed it, which gets its id back; reasoning
that cannot be placed so (its follower is gone, it was written by another
provider, or it is unsigned) is refused, sent as text, or left out
(``thinking="keep"|"text"|"drop"``).

Normalisations (``from_openai_responses(to_openai_responses(h)) == h`` up to
these):

- Consecutive ``function_call_output`` items become one user message; a
  user message holding results and other blocks comes back as two.
- Consecutive assistant items (messages, calls, reasoning) become one
  assistant message, so two assistant messages in a row come back as one.
- ``tool_result.is_error`` and text ``cache`` marks have no field: not
  exported, they come back false and absent.
- ``developer`` messages come back as system messages; a ``refusal`` part
  as text; a message item's own id is kept only when reasoning needs it.
- turnkit fields a transcript has no place for (``id``, ``metadata``,
  ``origin``, ``invocation_id``) are not exported.
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
    native_origin,
    need_keys,
    need_list,
    need_object,
    need_text,
    origin_for,
    parse_data_url,
    thinking_fallback,
)
from turnkit.messages.message import Message

__all__ = [
    "from_openai_responses",
    "reasoning_signature",
    "reasoning_state",
    "responses_input_part",
    "to_openai_responses",
]

PROVIDER = "openai-responses"
FORMAT = "OpenAI Responses"
_ASSISTANT_ITEMS = ("function_call", "reasoning")
_ITEM_KEYS = {
    "message": frozenset({"type", "role", "content", "id", "status"}),
    "function_call": frozenset({"type", "call_id", "name", "arguments", "id", "status"}),
    "function_call_output": frozenset({"type", "call_id", "output", "id", "status"}),
    "reasoning": frozenset({"type", "id", "summary", "encrypted_content", "content", "status"}),
}
_PART_KEYS = {
    "input_text": frozenset({"type", "text"}),
    "output_text": frozenset({"type", "text", "annotations", "logprobs"}),
    "refusal": frozenset({"type", "refusal"}),
    "input_image": frozenset({"type", "image_url", "detail"}),
    "input_file": frozenset({"type", "filename", "file_data", "file_url"}),
}


def reasoning_signature(
    item_id: str,
    encrypted_content: str | None = None,
    next_type: str | None = None,
    next_id: str | None = None,
) -> str:
    """The thinking ``signature`` that keeps a reasoning item replayable."""
    state = {"id": item_id}
    if encrypted_content:
        state["encrypted_content"] = encrypted_content
    if next_type:
        state["next_type"] = next_type
        if next_id:
            state["next_id"] = next_id
    return json.dumps(state, separators=(",", ":"))


def reasoning_state(signature: str | None) -> dict[str, str] | None:
    """The state in a :func:`reasoning_signature`, or None for any other signature."""
    if not signature:
        return None
    try:
        state = json.loads(signature)
    except ValueError:
        return None
    if not isinstance(state, dict) or not isinstance(state.get("id"), str) or not state["id"]:
        return None
    return {k: v for k, v in state.items() if isinstance(v, str)}


# -- import --------------------------------------------------------------------


def from_openai_responses(items: object, *, model: str | None = None) -> list[Message]:
    """Responses ``input`` items as validated turnkit messages.

    ``model`` records who wrote the assistant turns (``origin``
    ``openai-responses:<model>``), so their reasoning is replayed natively to
    that model only. Raises :class:`~turnkit.InvalidMessageError` naming
    the place of anything that cannot be represented (``input[4].type``).
    """
    listed = need_list(items, "input")
    out = Collector(origin_for(PROVIDER, model))
    group: list[Block] = []
    group_role, group_at = "", ""  # group_role: system, user, assistant or results
    for index, raw in enumerate(listed):
        path = f"input[{index}]"
        item = need_object(raw, path)
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind not in _ITEM_KEYS:
            problem = f"turnkit cannot represent a {kind!r} item ({', '.join(_ITEM_KEYS)})"
            raise InvalidMessageError(f"{path}.type", problem)
        need_keys(item, path, _ITEM_KEYS[kind], fmt=FORMAT)
        role = _role_of(item, kind, path)
        if group and role != group_role:
            out.add("user" if group_role == "results" else group_role, group, group_at)
            group = []
        following = listed[index + 1] if index + 1 < len(listed) else None
        blocks = _item_blocks(item, kind, path, out, following)
        if role in ("system", "user"):
            out.add(role, blocks, path)  # each message item is a message of its own
            continue
        if not group:
            group_role, group_at = role, path
        group += blocks
    if group:
        out.add("user" if group_role == "results" else group_role, group, group_at)
    return out.result()


def _role_of(item: Mapping[str, Any], kind: str, path: str) -> str:
    """The turnkit message an item belongs in: system, user, assistant, or results."""
    if kind == "function_call_output":
        return "results"
    if kind in _ASSISTANT_ITEMS:
        return "assistant"
    role = item.get("role")
    if role not in ("system", "developer", "user", "assistant"):
        problem = f"unknown role {role!r} (use system, developer, user or assistant)"
        raise InvalidMessageError(f"{path}.role", problem)
    return "system" if role == "developer" else role


def _item_blocks(
    item: Mapping[str, Any], kind: str, path: str, out: Collector, following: object
) -> list[Block]:
    if kind == "message":
        need_keys(item, path, _ITEM_KEYS[kind], required=("role", "content"), fmt=FORMAT)
        return _parts(item["content"], f"{path}.content", assistant=item["role"] == "assistant")
    if kind == "reasoning":
        return _reasoning(item, path, following)
    if kind == "function_call":
        need_keys(item, path, _ITEM_KEYS[kind], required=("call_id", "name"), fmt=FORMAT)
        arguments = json_object(item.get("arguments", "{}"), f"{path}.arguments")
        call_id = out.call_id(item["call_id"], f"{path}.call_id")
        with at(path):
            return [ToolUseBlock(call_id, need_text(item["name"], "name"), arguments)]
    need_keys(item, path, _ITEM_KEYS[kind], required=("call_id", "output"), fmt=FORMAT)
    output = item["output"]
    content: Any = output if isinstance(output, str) else _parts(output, f"{path}.output")
    with at(path):
        return [ToolResultBlock(need_text(item["call_id"], "call_id"), content)]


def _reasoning(item: Mapping[str, Any], path: str, following: object) -> list[Block]:
    item_id = need_text(item.get("id"), f"{path}.id")
    if item.get("content"):
        problem = "raw reasoning content cannot be represented (only the summary)"
        raise InvalidMessageError(f"{path}.content", problem)
    texts = []
    for index, raw in enumerate(need_list(item.get("summary") or [], f"{path}.summary")):
        part = need_object(raw, f"{path}.summary[{index}]")
        need_keys(
            part, f"{path}.summary[{index}]", {"type", "text"}, required=("text",), fmt=FORMAT
        )
        texts.append(need_text(part["text"], f"{path}.summary[{index}].text"))
    encrypted = item.get("encrypted_content")
    if encrypted is not None:
        need_text(encrypted, f"{path}.encrypted_content")
    next_type = next_id = None
    if isinstance(following, Mapping):
        next_type = following.get("type") or ("message" if "role" in following else None)
        next_id = following.get("id") if isinstance(following.get("id"), str) else None
    signature = reasoning_signature(item_id, encrypted, next_type, next_id)
    return [ThinkingBlock("\n\n".join(t for t in texts if t), signature)]


def _parts(value: object, path: str, *, assistant: bool = False) -> list[Block]:
    if isinstance(value, str):
        return [TextBlock(value)]
    blocks = []
    allowed = (
        ("output_text", "refusal") if assistant else ("input_text", "input_image", "input_file")
    )
    for index, raw in enumerate(need_list(value, path)):
        where = f"{path}[{index}]"
        part = need_object(raw, where)
        kind = part.get("type")
        if kind not in allowed:
            problem = f"turnkit cannot represent a {kind!r} part here ({', '.join(allowed)})"
            raise InvalidMessageError(f"{where}.type", problem)
        need_keys(part, where, _PART_KEYS[kind], fmt=FORMAT)
        blocks.append(_part(part, kind, where))
    return blocks


def _part(part: Mapping[str, Any], kind: str, path: str) -> Block:
    if kind in ("input_text", "output_text", "refusal"):
        field = "refusal" if kind == "refusal" else "text"
        if part.get("annotations"):
            raise InvalidMessageError(f"{path}.annotations", "turnkit text has no annotations")
        return TextBlock(need_text(part.get(field), f"{path}.{field}"))
    if kind == "input_image":
        if part.get("detail", "auto") != "auto":
            problem = f"turnkit images have no detail setting (only 'auto'), got {part['detail']!r}"
            raise InvalidMessageError(f"{path}.detail", problem)
        url = need_text(part.get("image_url"), f"{path}.image_url")
        with at(path):
            return ImageBlock(
                parse_data_url(url, "image_url") if url.startswith("data:") else UrlSource(url)
            )
    filename = need_text(part.get("filename"), f"{path}.filename")
    with at(path):
        if "file_data" in part:
            return FileBlock(
                parse_data_url(need_text(part["file_data"], "file_data"), "file_data"), filename
            )
        return FileBlock(UrlSource(need_text(part.get("file_url"), "file_url")), filename)


# -- export --------------------------------------------------------------------


def to_openai_responses(
    messages: object, *, thinking: ThinkingExport = "keep"
) -> list[dict[str, Any]]:
    """turnkit messages as Responses ``input`` items.

    ``thinking`` says what happens to reasoning that cannot be replayed
    (see the module docs). Raises :class:`~turnkit.InvalidMessageError`
    naming the block that has no Responses form.
    """
    check_mode(thinking)
    items: list[dict[str, Any]] = []
    seen: set[str] = set()  # item ids already used: the API refuses duplicates
    for index, message in enumerate(exportable(messages)):
        path = f"messages[{index}]"
        if message.role == "assistant":
            items += _assistant(message, path, thinking, seen)
            continue
        parts = []
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                output = _output(block)
                items.append(
                    {"type": "function_call_output", "call_id": block.tool_use_id, "output": output}
                )
            else:
                parts.append(_input_part(block))
        if parts or not message.content:
            items.append({"type": "message", "role": message.role, "content": parts})
    return items


def _output(block: ToolResultBlock) -> str | list[dict[str, Any]]:
    if isinstance(block.content, str):
        return block.content
    return [_input_part(part) for part in block.content]


def responses_input_part(block: Block) -> dict[str, Any] | None:
    """A text, image or file block as a Responses input part (None for other
    blocks). The Responses provider uses it too."""
    if isinstance(block, TextBlock):
        return {"type": "input_text", "text": block.text}
    if isinstance(block, ImageBlock):
        source = block.source
        url = data_url(source) if isinstance(source, Base64Source) else source.url
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    if not isinstance(block, FileBlock):
        return None
    if isinstance(block.source, Base64Source):
        data = data_url(block.source)
        return {"type": "input_file", "filename": block.filename, "file_data": data}
    return {"type": "input_file", "filename": block.filename, "file_url": block.source.url}


def _input_part(block: Block) -> dict[str, Any]:
    part = responses_input_part(block)
    assert part is not None  # placement rules leave only text, images and files here
    return part


_Pending = tuple[str, ThinkingBlock, dict[str, str]]


def _assistant(
    message: Message, path: str, mode: ThinkingExport, seen: set[str]
) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    pending: _Pending | None = None  # native reasoning waiting for the block it preceded
    own = native_origin(message, PROVIDER)
    for position, block in enumerate(message.content):
        where = f"{path}.content[{position}]"
        if isinstance(block, ThinkingBlock):
            _unplaced(items, pending, mode)
            state = reasoning_state(block.signature) if own and not block.redacted else None
            pending = (where, block, state) if state is not None else None
            if state is None:
                reason = foreign_reason(message, block, PROVIDER, FORMAT)
                if (fallback := thinking_fallback(block, mode, where, reason)) is not None:
                    _append(items, _output_item(fallback, where))
            continue
        item = _output_item(block, where)
        if pending is not None:
            reasoning = _claim(pending, item, seen)
            if reasoning is None:
                _unplaced(items, pending, mode)
            else:
                items.append(reasoning)
                next_id = pending[2].get("next_id")
                item = {"id": next_id, **item} if next_id else item
            pending = None
        _append(items, item)
    _unplaced(items, pending, mode)
    return items


def _claim(pending: _Pending, item: dict[str, Any], seen: set[str]) -> dict[str, Any] | None:
    """The reasoning item of ``pending`` if ``item`` is the one that followed it."""
    _, thinking, state = pending
    ids = [state["id"], *([state["next_id"]] if state.get("next_id") else [])]
    if state.get("next_type") != item["type"] or any(i in seen for i in ids):
        return None
    seen.update(ids)
    text = thinking.thinking
    summary = [{"type": "summary_text", "text": text}] if text else []
    reasoning: dict[str, Any] = {"type": "reasoning", "id": state["id"], "summary": summary}
    if state.get("encrypted_content"):
        reasoning["encrypted_content"] = state["encrypted_content"]
    return reasoning


def _unplaced(items: list[dict[str, Any]], pending: _Pending | None, mode: ThinkingExport) -> None:
    """Reasoning whose own follower is not next: refused, as text, or left out."""
    if pending is None:
        return
    where, thinking, _ = pending
    reason = f"{FORMAT} requires this reasoning to be followed by the item it preceded"
    if (fallback := thinking_fallback(thinking, mode, where, reason)) is not None:
        _append(items, _output_item(fallback, where))


def _output_item(block: Block, path: str) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        text = {"type": "output_text", "text": block.text, "annotations": []}
        return {"type": "message", "role": "assistant", "content": [text]}
    if isinstance(block, ToolUseBlock):
        arguments = json.dumps(thaw(block.input))
        return {
            "type": "function_call",
            "call_id": block.id,
            "name": block.name,
            "arguments": arguments,
        }
    raise InvalidMessageError(path, f"{FORMAT} takes {block.type} blocks only in user messages")


def _append(items: list[dict[str, Any]], item: dict[str, Any]) -> None:
    """Append ``item``; text right after text joins the same message item."""
    last = items[-1] if items else None
    if (
        item["type"] == "message"
        and last is not None
        and last.get("type") == "message"
        and "id" not in item
    ):
        last["content"].extend(item["content"])
    else:
        items.append(item)
