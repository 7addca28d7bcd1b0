"""Compaction: compact(), the cut rule, the estimate, and Compaction's settings."""

from __future__ import annotations

from typing import Any

import pytest

import turnkit
from turnkit import (
    Compaction,
    ContextTooLongError,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
    compact,
)
from turnkit.agent.compaction import (
    DEFAULT_INSTRUCTIONS,
    TokenReport,
    cut_index,
    estimate_tokens,
    plan_compaction,
)
from turnkit.testing import ScriptedModel


def talk(pairs: int, start: int = 0) -> list[Message]:
    messages = []
    for i in range(start, start + pairs):
        messages += [Message.user(f"question {i}"), Message.assistant(f"answer {i}")]
    return messages


# -- settings ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_tokens", 0),
        ("max_tokens", -5),
        ("max_tokens", "1000"),
        ("max_tokens", True),
        ("max_tokens", 1.5),
        ("keep_last", -1),
        ("keep_last", "6"),
        ("model", ""),
        ("model", 42),
        ("instructions", ""),
        ("instructions", "   "),
        ("instructions", ["be brief"]),
    ],
)
def test_bad_settings_raise_a_value_error_naming_the_field(field: str, value: Any) -> None:
    settings: dict[str, Any] = {"max_tokens": 1000, field: value}
    with pytest.raises(ValueError, match=rf"Compaction\.{field}"):
        Compaction(**settings)


def test_settings_are_frozen_and_have_the_documented_defaults() -> None:
    compaction = Compaction(1000)
    assert (compaction.keep_last, compaction.model, compaction.instructions) == (6, None, None)
    with pytest.raises(AttributeError):
        compaction.max_tokens = 5  # type: ignore[misc]


def test_compaction_and_compact_are_exported() -> None:
    assert {"Compaction", "compact", "ContextTooLongError"} <= set(turnkit.__all__)


# -- compact() --------------------------------------------------------------------


async def test_compact_summarises_all_but_the_last_messages() -> None:
    history = talk(5)
    summariser = ScriptedModel(["They asked five questions."])
    compacted = await compact(history, summariser, keep_last=4)

    assert compacted[1:] == history[6:]
    summary = compacted[0]
    assert (summary.type, summary.role, summary.text) == (
        "compaction",
        "user",
        "They asked five questions.",
    )
    assert summary.metadata["replaced"] == 6
    assert summary.metadata["tokens_before"] == estimate_tokens(history)
    assert summary.metadata["tokens_after"] == estimate_tokens(compacted)
    (request,) = summariser.requests
    assert request.system == DEFAULT_INSTRUCTIONS
    (sent,) = request.messages
    assert "question 0" in sent.text and "answer 2" in sent.text
    assert "question 3" not in sent.text  # kept, so not summarised
    assert history == talk(5)  # the input is not changed


async def test_compact_takes_dicts_and_instructions() -> None:
    summariser = ScriptedModel(["Short."])
    history = [m.to_dict() for m in talk(2)]
    compacted = await compact(history, summariser, keep_last=1, instructions="Be terse.")
    assert summariser.requests[0].system == "Be terse."
    assert compacted[1] == Message.from_dict(history[-1])


async def test_compact_with_nothing_before_the_kept_tail_returns_the_messages() -> None:
    summariser = ScriptedModel([])
    history = talk(2)
    assert await compact(history, summariser, keep_last=6) == history
    assert summariser.requests == []


async def test_a_second_compaction_summarises_the_first_summary_and_what_followed() -> None:
    summariser = ScriptedModel(["First summary.", "Second summary."])
    first = await compact(talk(4), summariser, keep_last=2)
    longer = first + talk(3, start=4)
    second = await compact(longer, summariser, keep_last=2)

    assert second[1:] == longer[-2:]
    text = summariser.requests[1].messages[0].text
    assert "Summary of the conversation before this point: First summary." in text
    assert "question 4" in text and "question 0" not in text
    # the first stood for 6 messages; the second for those and 6 more
    assert (first[0].metadata["replaced"], second[0].metadata["replaced"]) == (6, 12)


async def test_a_summariser_that_returns_nothing_makes_compact_raise() -> None:
    with pytest.raises(ValueError, match="returned no text"):
        await compact(talk(4), ScriptedModel(["  "]), keep_last=2)


async def test_compact_needs_valid_messages() -> None:
    with pytest.raises(turnkit.InvalidMessageError, match=r"^messages\[0\]\.role"):
        await compact([{"role": "bot", "content": []}], ScriptedModel([]))


# -- the cut ----------------------------------------------------------------------


def test_the_cut_never_separates_a_tool_call_from_its_result() -> None:
    call = Message.assistant("Checking.", ToolUseBlock("c1", "lookup", {"id": 4}))
    result = Message.user(ToolResultBlock("c1", "shipped"))
    messages = [*talk(2), call, result, Message.assistant("It shipped.")]
    # keep_last=2 would start the tail at the result: the call is kept with it
    assert cut_index(messages, 2) == 4
    assert messages[cut_index(messages, 2)] is call


async def test_a_tool_call_and_its_result_stay_together_in_compact() -> None:
    call = Message.assistant(ToolUseBlock("c1", "lookup", {"id": 4}))
    result = Message.user(ToolResultBlock("c1", "shipped"))
    messages = [*talk(2), call, result, Message.assistant("It shipped.")]
    compacted = await compact(messages, ScriptedModel(["S."]), keep_last=2)
    assert compacted[1:] == [call, result, messages[-1]]


def test_the_cut_never_splits_thinking_from_its_reply() -> None:
    thinking = Message.assistant(ThinkingBlock("Let me think.", signature="sig"))
    reply = Message.assistant("Forty-two.")
    messages = [*talk(2), Message.user("Why?"), thinking, reply]
    assert cut_index(messages, 1) == 5  # not between the thinking and its reply
    assert cut_index(messages, 2) == 5


async def test_images_in_the_kept_tail_are_kept_and_summarised_ones_become_text() -> None:
    old = Message.user("Look:", ImageBlock(UrlSource("https://img.example/old.png")))
    new = Message.user("And:", ImageBlock(UrlSource("https://img.example/new.png")))
    messages = [old, Message.assistant("A cat."), new, Message.assistant("A dog.")]
    summariser = ScriptedModel(["They showed a cat."])
    compacted = await compact(messages, summariser, keep_last=2)
    assert compacted[1] is new
    sent = summariser.requests[0].messages[0]
    assert [type(b) for b in sent.content] == [TextBlock]
    assert "[image] https://img.example/old.png" in sent.text


def test_the_cut_is_zero_when_everything_is_in_the_tail() -> None:
    assert cut_index(talk(1), 6) == 0
    call = Message.assistant(ToolUseBlock("c1", "f", {}))
    assert cut_index([call, Message.user(ToolResultBlock("c1", "x"))], 1) == 0


# -- the estimate -----------------------------------------------------------------


def test_the_estimate_is_characters_over_four_without_a_report() -> None:
    messages = [Message.user("a" * 40), Message.assistant("b" * 41)]
    assert estimate_tokens(messages) == 21  # ceil(81 / 4)


def test_the_estimate_uses_the_latest_reported_input_tokens() -> None:
    reply = Message.assistant("b" * 40)
    messages = [Message.user("a" * 4000), reply, Message.user("c" * 40)]
    report = TokenReport(reply, 900)
    assert estimate_tokens(messages, report) == 900 + 20  # the reply and what follows
    assert estimate_tokens(messages[:1], report) == 1000  # reply not there: characters


def test_an_image_counts_as_a_thousand_tokens() -> None:
    image = Message.user(ImageBlock(UrlSource("https://img.example/a.png")))
    assert estimate_tokens([image]) > 1000


# -- plan_compaction: the seam for every caller --------------------------------------


async def test_a_conversation_under_max_tokens_is_sent_as_it_is() -> None:
    messages = tuple(talk(3))
    plan = await plan_compaction(messages, Compaction(10_000), ScriptedModel([]))
    assert (plan.message, plan.send, plan.failure) == (None, messages, None)


async def test_the_plan_says_where_the_compaction_message_goes() -> None:
    earlier = await compact(talk(3), ScriptedModel(["Old."]), keep_last=2)
    stored = [*talk(1, start=90), *earlier, *talk(3, start=3)]  # an old summary in place
    plan = await plan_compaction(stored, Compaction(5, keep_last=2), ScriptedModel(["New."]))
    assert plan.message is not None and plan.message.text == "New."
    assert stored[plan.index :] == list(plan.send[1:]) == stored[-2:]
    assert plan.message.metadata["replaced"] == 4 + 2 + 4  # old summary's, its tail, 2 pairs


async def test_a_failing_summariser_goes_on_when_the_conversation_fits() -> None:
    def fail(request: object) -> str:
        raise RuntimeError("summariser is down")

    messages = tuple(talk(4))
    model = ScriptedModel([], context_window=None)  # unknown window: counts as fitting
    plan = await plan_compaction(
        messages, Compaction(5, keep_last=2), model, summariser=ScriptedModel([fail])
    )
    assert plan.message is None and plan.send == messages
    assert "summariser is down" in (plan.failure or "")


async def test_a_failing_summariser_raises_when_the_conversation_is_too_long() -> None:
    messages = tuple(talk(4))
    model = ScriptedModel([""], context_window=10)
    with pytest.raises(ContextTooLongError, match="context window") as caught:
        await plan_compaction(messages, Compaction(5, keep_last=2), model)
    assert caught.value.context_window == 10
    assert caught.value.tokens == estimate_tokens(messages)
    assert "no text" in caught.value.cause


async def test_a_summary_is_at_most_a_quarter_of_max_tokens() -> None:
    summariser = ScriptedModel(["S."])
    long = [Message.user("x" * 4000), Message.assistant("y"), Message.user("z")]
    await plan_compaction(long, Compaction(1000, keep_last=2), summariser)
    assert summariser.requests[0].settings.max_output_tokens == 250
