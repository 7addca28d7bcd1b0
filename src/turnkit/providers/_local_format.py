"""Text in and out of the embedded local model: chat messages, tool turns, answers.

The local model is a small text-only chat model without native tool calling.
Tools become a JSON-schema-constrained turn: the model must reply with one
JSON object, either ``{"tool": <name>, "arguments": {...}}`` (one branch per
tool, its arguments held to the tool's input schema) or ``{"answer": "..."}``.
History is rendered in that same shape, so the model sees its own past calls
the way it was asked to write them.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from turnkit.messages import (
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    thaw,
)
from turnkit.providers.base import ToolSpec
from turnkit.providers.edges import tool_call

__all__ = [
    "ANSWER_ONLY_SCHEMA",
    "DEFAULT_SYSTEM",
    "AnswerText",
    "answered_calls",
    "call_key",
    "chat_messages",
    "parse_tool_turn",
    "tool_hint",
    "tool_turn_schema",
]

_MAX_REF_DEPTH = 8
DEFAULT_SYSTEM = "You are a helpful assistant. Answer briefly and accurately."
"""Used when a request has no system text: without one, this small model
wanders (asked for the capital of France, it recites French words)."""
ANSWER_ONLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}

ChatMessage = dict[str, str]


# -- canonical messages to chat messages ----------------------------------------


def chat_messages(
    system: str | None, messages: Sequence[Message], tools: Sequence[ToolSpec]
) -> list[ChatMessage]:
    """Chat messages (``role``, ``content``) for the model's chat template.

    The system text (with a description of the tools, when there are any)
    comes first; tool calls are rendered as the JSON the model is asked to
    write, tool results as user text naming the tool; neighbours of the same
    role are joined, as chat templates expect turns to alternate.
    """
    hint = tool_hint(tools) if tools else ""
    system_text = "\n\n".join(part for part in (system or DEFAULT_SYSTEM, hint) if part)
    out: list[ChatMessage] = [{"role": "system", "content": system_text}] if system_text else []
    names: dict[str, str] = {}
    for message in messages:
        if message.role == "assistant":
            names.update((b.id, b.name) for b in message.content if isinstance(b, ToolUseBlock))
            text = _assistant_text(message, tool_turns=bool(tools))
        else:
            text = _user_text(message, names)
        if not text:
            continue
        if out and out[-1]["role"] == message.role:
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": message.role, "content": text})
    return out


def _assistant_text(message: Message, *, tool_turns: bool) -> str:
    text = "\n".join(b.text for b in message.content if isinstance(b, TextBlock) and b.text)
    calls = [
        json.dumps({"tool": b.name, "arguments": thaw(b.input)}, ensure_ascii=False)
        for b in message.content
        if isinstance(b, ToolUseBlock)
    ]
    if calls:
        return "\n".join([text, *calls] if text else calls)
    if tool_turns and text:
        return json.dumps({"answer": text}, ensure_ascii=False)
    return text


def _user_text(message: Message, names: Mapping[str, str]) -> str:
    parts = []
    for block in message.content:
        if isinstance(block, TextBlock):
            parts.append(block.text)
        elif isinstance(block, ToolResultBlock):
            parts.append(_result_text(block, names))
    return "\n".join(part for part in parts if part)


def _result_text(block: ToolResultBlock, names: Mapping[str, str]) -> str:
    name = names.get(block.tool_use_id)
    tool = f"tool {name}" if name else f"tool call {block.tool_use_id}"
    content = block.content
    if not isinstance(content, str):
        content = "\n".join(p.text for p in content if isinstance(p, TextBlock))
    head = f"Error from {tool}:" if block.is_error else f"Result of {tool}:"
    return f"{head}\n{content}" if content else f"{head} (empty)"


# -- tools as a constrained turn ----------------------------------------------------


def tool_hint(tools: Sequence[ToolSpec]) -> str:
    """A short system note: the reply format and one line per tool."""
    lines = [
        "You can call tools. Reply with exactly one JSON object:",
        '- to call a tool: {"tool": "<tool name>", "arguments": {...}}',
        '- to answer the user: {"answer": "<your reply>"}',
        "Answer directly unless the user asks for what a tool does. After a tool "
        "result, answer the user with it.",
        "",
        "Tools:",
    ]
    for tool in tools:
        line = f"- {tool.name}({_signature(tool.input_schema)})"
        lines.append(f"{line}: {tool.description}" if tool.description else line)
    return "\n".join(lines)


def _signature(schema: Mapping[str, Any]) -> str:
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return "..."
    required = set(schema.get("required") or ())
    parts = []
    for name, prop in properties.items():
        kind = _type_name(prop) if isinstance(prop, Mapping) else "any"
        parts.append(f"{name}: {kind}" if name in required else f"{name}?: {kind}")
    return ", ".join(parts)


def _type_name(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, Sequence):
        return " | ".join(str(k) for k in kind)
    return "object" if "$ref" in schema else "any"


def tool_turn_schema(tools: Sequence[ToolSpec]) -> dict[str, Any]:
    """The JSON schema of a tool turn: one branch per tool, plus the answer.

    Local ``$ref``s of each tool's schema are inlined (the schema is nested
    under ``arguments``, where its own ``#/$defs`` would not resolve), and
    the arguments object refuses unknown keys unless the tool says otherwise.
    """
    branches = [
        _closed_object({"tool": {"const": tool.name}, "arguments": _arguments_schema(tool)})
        for tool in tools
    ]
    branches.append(ANSWER_ONLY_SCHEMA)
    return {"anyOf": branches}


def call_key(name: str, arguments: Any) -> str:
    """One key per distinct call: the tool name and its arguments, canonical."""
    return f"{name}:{json.dumps(arguments, sort_keys=True, default=str)}"


def answered_calls(messages: Sequence[Message]) -> frozenset[str]:
    """The calls in ``messages`` that already have a result."""
    answered = {
        block.tool_use_id
        for message in messages
        for block in message.content
        if isinstance(block, ToolResultBlock)
    }
    return frozenset(
        call_key(block.name, thaw(block.input))
        for message in messages
        for block in message.content
        if isinstance(block, ToolUseBlock) and block.id in answered
    )


def repeats_answered_call(raw: str, answered: frozenset[str]) -> bool:
    """Whether a tool turn's reply asks again for a call that has its result."""
    try:
        value = json.loads(raw, strict=False)
    except ValueError:
        return False
    if not isinstance(value, dict) or "tool" not in value:
        return False
    return call_key(str(value["tool"]), value.get("arguments")) in answered


def _closed_object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _arguments_schema(tool: ToolSpec) -> dict[str, Any]:
    root = thaw(tool.input_schema)
    schema = _inline_refs(root, root, 0)
    if not isinstance(schema, dict):
        return {"type": "object"}
    schema.pop("$defs", None)
    schema.pop("definitions", None)
    if "properties" in schema:
        schema.setdefault("type", "object")
        schema.setdefault("additionalProperties", False)
    return schema


def _inline_refs(value: Any, root: Mapping[str, Any], depth: int) -> Any:
    """``value`` with each local ``$ref`` replaced by what it points to."""
    if isinstance(value, list):
        return [_inline_refs(item, root, depth) for item in value]
    if not isinstance(value, dict):
        return value
    ref = value.get("$ref")
    if isinstance(ref, str):
        rest = {k: v for k, v in value.items() if k != "$ref"}
        target = _resolve(ref, root) if depth < _MAX_REF_DEPTH else None
        if target is None:
            return _inline_refs(rest, root, depth) or {}
        merged = {**target, **rest}
        return _inline_refs(merged, root, depth + 1)
    return {k: _inline_refs(v, root, depth) for k, v in value.items()}


def _resolve(ref: str, root: Mapping[str, Any]) -> dict[str, Any] | None:
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for step in ref[2:].split("/"):
        step = step.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or step not in node:
            return None
        node = node[step]
    return dict(node) if isinstance(node, Mapping) else None


# -- reading a tool turn --------------------------------------------------------------


def parse_tool_turn(raw: str, tools: Iterable[ToolSpec]) -> TextBlock | ToolUseBlock | None:
    """A tool call or an answer from the model's JSON reply.

    A reply cut short (``max_tokens``) keeps the part of the answer that was
    written, exactly as it was streamed; a cut-short tool call gives None.
    """
    try:
        value = json.loads(raw, strict=False)
    except ValueError:
        value = None
    names = {tool.name for tool in tools}
    if isinstance(value, dict):
        name, arguments = value.get("tool"), value.get("arguments")
        if name in names and isinstance(arguments, dict):
            return tool_call(f"call_{uuid.uuid4().hex}", name, arguments)
        if isinstance(value.get("answer"), str):
            return TextBlock(value["answer"]) if value["answer"] else None
    answer = AnswerText()
    text = answer.feed(raw)
    return TextBlock(text) if text else None


_KEY = re.compile(r'\s*\{\s*"([^"\\]*)"\s*(:\s*"?)?')
_STRING_BODY = re.compile(r'(?:[^"\\]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*')
_HIGH_SURROGATE_END = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}$")


class AnswerText:
    """The answer string of a growing ``{"answer": "..."}`` reply, as it appears.

    Feed it the reply piece by piece; each call returns the newly readable
    text of the answer (escapes decoded, never half an escape or half a
    surrogate pair). A reply that turns out to be a tool call gives nothing.
    The pieces returned always add up to ``text``.

    >>> answer = AnswerText()
    >>> [answer.feed(piece) for piece in ['{"ans', 'wer": "Hel', 'lo"}']]
    ['', 'Hel', 'lo']
    """

    def __init__(self) -> None:
        self._raw = ""
        self._start: int | None = None  # where the answer string's body begins
        self._done = False
        self.text = ""

    def feed(self, piece: str) -> str:
        """Add ``piece`` of the reply; return the answer text it completes."""
        self._raw += piece
        if self._done or (self._start is None and not self._find_start()):
            return ""
        body = self._raw[self._start :]
        safe = _STRING_BODY.match(body).group()  # type: ignore[union-attr]  # always matches
        if len(safe) < len(body) and body[len(safe)] == '"':
            self._done = True  # the closing quote
        elif _HIGH_SURROGATE_END.search(safe):
            safe = safe[:-6]  # wait for the low half of the pair
        text = json.loads(f'"{safe}"', strict=False)
        if not text.startswith(self.text):
            return ""
        new, self.text = text[len(self.text) :], text
        return new

    def _find_start(self) -> bool:
        match = _KEY.match(self._raw)
        if match is None:
            if self._raw.strip() and not self._raw.lstrip().startswith("{"):
                self._done = True
            return False
        if match.group(1) != "answer":
            self._done = True  # a tool call
            return False
        if not (match.group(2) or "").endswith('"'):
            return False
        self._start = match.end()
        return True
