"""The message half of the context pipeline, before a provider sees anything.

``default_convert_to_llm`` decides which messages a model sees and how;
``normalize_tool_call_history`` repairs tool-call pairing so that every
provider accepts the result. :class:`LlmConversion` does both for a
conversation that grows, converting only what is new since the last call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter, is_

from turnkit.messages.blocks import Block, TextBlock, ToolResultBlock, ToolUseBlock
from turnkit.messages.message import Message
from turnkit.messages.prefix import PrefixMemo
from turnkit.messages.validate import validate_messages

__all__ = [
    "LlmConversion",
    "default_convert_to_llm",
    "interrupted_result",
    "normalize_tool_call_history",
]

_SUMMARY_PREFACE = {
    "compaction": "The earlier part of this conversation was compacted into this summary:",
    "branch_summary": "This summarises a branch of the conversation that was left:",
}


def default_convert_to_llm(messages: Sequence[Message]) -> list[Message]:
    """Standard messages pass; summaries become user text; custom ones are skipped.

    A ``compaction`` or ``branch_summary`` message becomes a user message whose
    text is a one-line preface and the summary wrapped in ``<summary>`` tags.
    """
    return _converted(validate_messages(messages))


def _converted(messages: Sequence[Message]) -> list[Message]:
    converted: list[Message] = []
    for message in messages:
        if message.type == "standard":
            converted.append(message)
        elif message.type in _SUMMARY_PREFACE:
            body = "\n".join(b.text for b in message.content if isinstance(b, TextBlock))
            text = f"{_SUMMARY_PREFACE[message.type]}\n<summary>\n{body}\n</summary>"
            converted.append(Message("user", (TextBlock(text),)))
    return converted


def interrupted_result(call: ToolUseBlock) -> ToolResultBlock:
    """The error result that stands in for a call that never got one."""
    text = f"Tool call {call.name} was interrupted before it produced a result."
    return ToolResultBlock(call.id, text, is_error=True)


def normalize_tool_call_history(messages: Sequence[Message]) -> list[Message]:
    """Pair every tool call with its result in the user message right after it.

    - The results to an assistant message's calls go in the user message
      immediately after it; one is inserted when the next message is not a
      user message, or when there is none.
    - A call without a result there gets :func:`interrupted_result`.
    - A result whose id has no call in the assistant message right before is
      dropped, and a message left empty by that is dropped.
    - In that user message, results come first in call order, then its other
      blocks in their original order.

    Idempotent; ``messages`` is not changed; unchanged messages are reused.
    """
    return _normalized_from(validate_messages(messages), 0)[0]


def _normalized_from(messages: Sequence[Message], start: int) -> tuple[list[Message], int, int]:
    """Normalize ``messages[start:]``, where a step of the repair begins.

    Also returns the last index where a step began and how many messages
    had been written by then: what is written before such a step depends
    only on the messages before it, and each step reads at most one message
    past its own, so a longer conversation with the same start can resume
    there (:class:`LlmConversion`).
    """
    out: list[Message] = []
    append, count = out.append, len(messages)
    index = step = start
    written = 0
    while index < count:
        step, written = index, len(out)
        message = messages[index]
        index += 1
        content = message.content
        if len(content) == 1 and type(content[0]) is TextBlock:
            append(message)  # most messages: nothing to repair
            continue
        kinds = tuple(map(type, content))  # one look at the block types
        if message.role == "assistant":
            if ToolUseBlock in kinds:
                calls = [b for b in content if type(b) is ToolUseBlock]
                following = messages[index] if index < count else None
                answer = following if following is not None and following.role == "user" else None
                append(message)
                append(_answer_calls(calls, answer))
                index += answer is not None
                continue
        elif ToolResultBlock in kinds:  # results with no call right before them
            kept = tuple(b for b in content if type(b) is not ToolResultBlock)
            if kept:
                append(message.clone(content=kept))
            continue
        append(message)
    return out, step, written


def _answer_calls(calls: list[ToolUseBlock], answer: Message | None) -> Message:
    """The user message answering ``calls``, built from ``answer`` if there is one."""
    call_ids = {call.id for call in calls}
    results: dict[str, ToolResultBlock] = {}
    others: list[Block] = []
    for block in answer.content if answer is not None else ():
        if type(block) is ToolResultBlock:
            if block.tool_use_id in call_ids and block.tool_use_id not in results:
                results[block.tool_use_id] = block
        else:
            others.append(block)
    content = tuple(results.get(call.id) or interrupted_result(call) for call in calls)
    content += tuple(others)
    if answer is None:
        return Message("user", content)
    return answer if content == answer.content else answer.clone(content=content)


@dataclass(frozen=True, slots=True)
class _Done:
    """What :class:`LlmConversion` keeps of one conversation it converted."""

    converted: tuple[Message, ...] | None  # its conversion; None: the messages themselves
    step: int  # in the conversion: where the repair can resume
    head: tuple[Message, ...] | None  # the repair's output before ``step``; None: unchanged


_START = _Done(None, 0, None)
_TYPE = attrgetter("type")


class LlmConversion:
    """:func:`default_convert_to_llm` (unless ``convert=False``) then
    :func:`normalize_tool_call_history`, for a conversation that grows.

    Both are pure functions of immutable messages, and conversion is message
    by message, so the work done on the start of a conversation is kept (for
    the last ``size`` conversations) and a call that brings the same start
    again converts only the messages after it. The result is always what the
    two functions give: a test compares them on random histories.
    The messages must be validated :class:`Message` objects.
    """

    __slots__ = ("_convert", "_memo")

    def __init__(self, *, convert: bool = True, size: int = 4) -> None:
        self._convert = convert
        self._memo: PrefixMemo[_Done] = PrefixMemo(size)

    def __call__(self, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        found = self._memo.find(messages)
        count, done = found if found is not None else (0, _START)
        suffix = messages[count:]
        new = self._converted(suffix)
        if done.converted is None and new is suffix:
            converted, kept = messages, None  # nothing converted: no copy
        else:
            converted = (messages[:count] if done.converted is None else done.converted) + new
            kept = converted
        step = done.step
        tail, resume, written = _normalized_from(converted, step)
        if done.head is None and _same(tail, converted, step):
            out, head = converted, None  # nothing repaired: no copy
        else:
            before = converted[:step] if done.head is None else done.head
            out = before + tuple(tail)
            head = out[: len(before) + written]
        self._memo.store(messages, _Done(kept, resume, head))
        return out

    def _converted(self, messages: tuple[Message, ...]) -> tuple[Message, ...]:
        """The conversion of ``messages``: the same tuple when it changes nothing."""
        if not self._convert or set(map(_TYPE, messages)) <= {"standard"}:
            return messages
        return tuple(_converted(messages))


def _same(tail: list[Message], converted: tuple[Message, ...], step: int) -> bool:
    """Whether the repair wrote ``converted[step:]`` as it was."""
    return len(tail) == len(converted) - step and all(map(is_, tail, converted[step:]))
