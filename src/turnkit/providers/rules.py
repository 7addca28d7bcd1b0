"""Rules every provider applies to a request, kept in one place.

- System messages are hoisted into the provider's system field.
- Thinking is replayed natively only to the provider and model that wrote it,
  and only with a non-empty signature; otherwise it is dropped or, with
  ``thinking_replay="text"``, sent as plain text.
- Tool-call ids are mapped to each provider's grammar, the same way for calls
  and results, while stored history keeps the originals.

Images have their own module, :mod:`turnkit.providers.images`; the edge
cases (unsupported blocks, empty text, where a history starts, malformed
tool arguments, errors, usage) theirs, :mod:`turnkit.providers.edges`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence

from turnkit.messages import Message, TextBlock, ThinkingBlock
from turnkit.providers.base import ModelRequest, ThinkingReplay
from turnkit.providers.edges import check_content, check_history_start, drop_empty_text
from turnkit.providers.images import ImagePolicy, apply_image_policy

__all__ = [
    "ToolIdMap",
    "anthropic_tool_id",
    "hoist_system",
    "nine_char_tool_id",
    "openai_chat_tool_id",
    "prepare",
    "replay_thinking",
    "responses_call_id",
]


def hoist_system(request: ModelRequest) -> tuple[str | None, tuple[Message, ...]]:
    """The system text (request.system, then system messages) and the other messages."""
    parts = [request.system] if request.system else []
    rest = []
    for message in request.messages:
        if message.role == "system":
            parts.append("\n".join(b.text for b in message.content if isinstance(b, TextBlock)))
        else:
            rest.append(message)
    system = "\n\n".join(part for part in parts if part)
    return system or None, tuple(rest)


def replay_thinking(
    messages: Sequence[Message], provider: str, model: str, mode: ThinkingReplay = "drop"
) -> tuple[Message, ...]:
    """Keep thinking only where ``provider``/``model`` can verify it.

    Native replay needs the message's ``origin`` to be this provider and model
    and a non-empty signature. Other thinking is dropped, or turned into text
    (``mode="text"``); redacted or empty thinking is always dropped. An
    assistant message left with nothing is dropped.
    """
    out = []
    for message in messages:
        if message.role != "assistant" or not any(
            type(b) is ThinkingBlock for b in message.content
        ):
            out.append(message)
            continue
        origin = message.origin
        native = origin is not None and origin.provider == provider and origin.model == model
        content = []
        for block in message.content:
            if type(block) is not ThinkingBlock or (native and block.signature):
                content.append(block)
            elif mode == "text" and not block.redacted and block.thinking.strip():
                content.append(TextBlock(f"<thinking>\n{block.thinking}\n</thinking>"))
        if len(content) == len(message.content) and all(
            a is b for a, b in zip(content, message.content, strict=True)
        ):
            out.append(message)
        elif content:
            out.append(message.clone(content=tuple(content)))
    return tuple(out)


class ToolIdMap:
    """Maps original tool-call ids to ids a provider accepts, consistently.

    The same original always maps to the same id, and two originals never map
    to the same id (a short hash keeps them apart).
    """

    def __init__(self, normalize: Callable[[str], str]) -> None:
        self._normalize = normalize
        self._mapped: dict[str, str] = {}
        self._taken: set[str] = set()

    def __call__(self, original: str) -> str:
        mapped = self._mapped.get(original)
        if mapped is not None:
            return mapped
        mapped = self._normalize(original)
        if mapped in self._taken:
            mapped = self._normalize(f"{original}_{_digest(original, 8)}")
            if mapped in self._taken:
                mapped = self._normalize(_digest(original, 24))
        self._mapped[original] = mapped
        self._taken.add(mapped)
        return mapped


def _digest(text: str, length: int) -> str:
    alphabet = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    number = int.from_bytes(hashlib.sha256(text.encode()).digest(), "big")
    chars = []
    for _ in range(length):
        number, index = divmod(number, 62)
        chars.append(alphabet[index])
    return "".join(chars)


_NOT_ANTHROPIC = re.compile(r"[^A-Za-z0-9_-]")


def anthropic_tool_id(original: str) -> str:
    """Anthropic: ``^[a-zA-Z0-9_-]+$``, at most 64 characters."""
    if len(original) <= 64 and not _NOT_ANTHROPIC.search(original):
        return original
    cleaned = _NOT_ANTHROPIC.sub("_", original)
    return cleaned if len(cleaned) <= 64 else cleaned[:55] + "_" + _digest(original, 8)


def openai_chat_tool_id(original: str) -> str:
    """OpenAI Chat Completions: at most 40 characters; ``call|item`` keeps the call."""
    head = original.split("|", 1)[0] or original
    return head if len(head) <= 40 else head[:31] + "_" + _digest(original, 8)


def responses_call_id(original: str) -> str:
    """OpenAI Responses ``call_id``: kept to ``[A-Za-z0-9_-]``, at most 64."""
    head = original.split("|", 1)[0] or original
    return anthropic_tool_id(head)


def nine_char_tool_id(original: str) -> str:
    """Servers that demand exactly nine characters of ``[a-zA-Z0-9]`` (Mistral)."""
    if len(original) == 9 and original.isascii() and original.isalnum():
        return original
    return _digest(original, 9)


async def prepare(
    request: ModelRequest, *, provider: str, model: str, takes_image_urls: bool
) -> tuple[str | None, tuple[Message, ...]]:
    """All shared rules in order, before anything is sent.

    Blocks the provider cannot take are refused (paths in the request's
    terms), system text is hoisted, thinking replayed or not, empty text
    left out, the start of the history fixed, and the image policy applied.
    Every provider calls this first, so a fix to a rule lands once for all.
    """
    policy = request.settings.image_policy or ImagePolicy()
    check_content(request.messages, provider, fetch_image_urls=policy.fetch_urls)
    system, messages = hoist_system(request)
    messages = replay_thinking(messages, provider, model, request.settings.thinking_replay)
    messages = check_history_start(drop_empty_text(messages))
    messages = await apply_image_policy(
        messages, policy, provider=provider, takes_urls=takes_image_urls
    )
    return system, messages
