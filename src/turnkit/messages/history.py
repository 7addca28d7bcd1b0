"""The message half of the context pipeline, before a provider sees anything.

``default_convert_to_llm`` decides which messages a model sees and how;
``normalize_tool_call_history`` repairs tool-call pairing so that every
provider accepts the result.
"""

from __future__ import annotations

from collections.abc import Sequence

from turnkit.messages.blocks import Block, TextBlock, ToolResultBlock, ToolUseBlock
from turnkit.messages.message import Message
from turnkit.messages.validate import validate_messages

__all__ = ["default_convert_to_llm", "interrupted_result", "normalize_tool_call_history"]

_SUMMARY_PREFACE = {
    "compaction": "The earlier part of this conversation was compacted into this summary:",
    "branch_summary": "This summarises a branch of the conversation that was left:",
}


def default_convert_to_llm(messages: Sequence[Message]) -> list[Message]:
    """Standard messages pass; summaries become user text; custom ones are skipped.

    A ``compaction`` or ``branch_summary`` message becomes a user message whose
    text is a one-line preface and the summary wrapped in ``<summary>`` tags.
    """
    converted: list[Message] = []
    for message in validate_messages(messages):
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
    messages = validate_messages(messages)
    out: list[Message] = []
    count = len(messages)
    index = 0
    while index < count:
        message = messages[index]
        index += 1
        kinds = tuple(map(type, message.content))
        if message.role == "assistant":
            if ToolUseBlock in kinds:
                calls = [b for b in message.content if type(b) is ToolUseBlock]
                following = messages[index] if index < count else None
                answer = following if following is not None and following.role == "user" else None
                out.append(message)
                out.append(_answer_calls(calls, answer))
                index += answer is not None
                continue
        elif ToolResultBlock in kinds:  # results with no call right before them
            kept = tuple(b for b in message.content if type(b) is not ToolResultBlock)
            if kept:
                out.append(message.clone(content=kept))
            continue
        out.append(message)
    return out


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
