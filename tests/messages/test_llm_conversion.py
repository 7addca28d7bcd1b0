"""LlmConversion: kept conversions never change what providers get."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from turnkit.messages import (
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    default_convert_to_llm,
    normalize_tool_call_history,
)
from turnkit.messages.history import LlmConversion

from .strategies import histories, message_types


def uncached(messages: tuple[Message, ...], convert: bool = True) -> tuple[Message, ...]:
    converted = default_convert_to_llm(messages) if convert else list(messages)
    return tuple(normalize_tool_call_history(converted))


@st.composite
def typed_histories(draw: st.DrawFn) -> tuple[Message, ...]:
    """Histories with summaries and custom messages among them."""
    history = draw(histories())
    return tuple(
        m.clone(type=draw(message_types)) if m.role != "system" and draw(st.booleans()) else m
        for m in history
    )


@given(
    st.lists(typed_histories(), min_size=1, max_size=4),
    st.lists(st.integers(0, 12), min_size=1, max_size=8),
    st.booleans(),
)
@settings(max_examples=300)
def test_growing_and_changing_conversations_convert_as_uncached(
    parts: list[tuple[Message, ...]], cuts: list[int], convert: bool
) -> None:
    """Calls on prefixes of a growing conversation, and on other conversations
    sharing or not sharing its start, give what the uncached pipeline gives."""
    conversion = LlmConversion(convert=convert, size=2)
    whole: tuple[Message, ...] = ()
    for part in parts:
        whole = _joined(whole, part)
    for cut in cuts:
        for messages in (whole[: cut * 2], whole[:cut], parts[cut % len(parts)]):
            assert conversion(messages) == uncached(messages, convert)


def _joined(first: tuple[Message, ...], second: tuple[Message, ...]) -> tuple[Message, ...]:
    """``first + second`` with the tool ids of ``second`` renamed apart."""
    renamed = []
    for message in second:
        content = tuple(_renamed(block, len(first)) for block in message.content)
        renamed.append(message.clone(content=content))
    return first + tuple(renamed)


def _renamed(block: object, salt: int) -> object:
    if type(block) is ToolUseBlock:
        return ToolUseBlock(f"{block.id}-{salt}", block.name, block.input)
    if type(block) is ToolResultBlock:
        return ToolResultBlock(f"{block.tool_use_id}-{salt}", block.content, block.is_error)
    return block


def test_a_trailing_call_answered_by_the_next_message_is_repaired_again() -> None:
    """The call at the end of one conversation had no answer; the longer one
    answers it, so the repair written for the first must not be reused."""
    call = Message.assistant(ToolUseBlock("c1", "add", {}))
    conversion = LlmConversion()
    first = (Message.user("hi"), call)
    assert conversion(first)[-1].content[0].is_error is True
    answered = (*first, Message.user(ToolResultBlock("c1", "3")))
    assert conversion(answered) == uncached(answered)
    assert conversion(answered)[-1].content[0].content == "3"


def test_an_unchanged_conversation_comes_back_without_a_copy() -> None:
    messages = (Message.user("q"), Message.assistant("a"), Message.user("q2"))
    conversion = LlmConversion()
    assert conversion(messages) is messages
    longer = (*messages, Message.assistant("a2"), Message.user("q3"))
    assert conversion(longer) is longer


def test_a_summary_in_a_longer_conversation_is_converted() -> None:
    start = (Message.user("q"), Message.assistant("a"))
    conversion = LlmConversion()
    conversion(start)
    summary = Message("user", (TextBlock("S"),), type="compaction")
    longer = (*start, summary, Message.user("next"))
    out = conversion(longer)
    assert out == uncached(longer)
    assert "<summary>\nS\n</summary>" in out[2].text
