"""default_convert_to_llm and normalize_tool_call_history (SPEC section 3)."""

from __future__ import annotations

from turnkit import (
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
    default_convert_to_llm,
    normalize_tool_call_history,
)
from turnkit.messages.history import interrupted_result

from ._assertions import assert_invalid

IMAGE = ImageBlock(UrlSource("https://a.example/x.png"))


def call(call_id: str, name: str = "search") -> ToolUseBlock:
    return ToolUseBlock(call_id, name, {"q": call_id})


def result(call_id: str, text: str = "ok") -> ToolResultBlock:
    return ToolResultBlock(call_id, text)


def interrupted(call_id: str, name: str = "search") -> ToolResultBlock:
    text = f"Tool call {name} was interrupted before it produced a result."
    return ToolResultBlock(call_id, text, is_error=True)


# -- default_convert_to_llm ------------------------------------------------------


def test_standard_messages_pass_unchanged() -> None:
    messages = [Message.system("s"), Message.user("q"), Message.assistant("a")]
    converted = default_convert_to_llm(messages)
    assert converted == messages
    assert all(a is b for a, b in zip(converted, messages, strict=True))


def test_compaction_becomes_user_text_with_a_preface_and_summary_tags() -> None:
    summary = Message.assistant("We fixed the bug.", "Tests pass.", type="compaction", id="s1")
    (converted,) = default_convert_to_llm([summary])
    assert converted.role == "user"
    assert converted.type == "standard"
    (block,) = converted.content
    preface, rest = block.text.split("\n", 1)
    assert "compact" in preface.lower()
    assert rest == "<summary>\nWe fixed the bug.\nTests pass.\n</summary>"


def test_branch_summary_becomes_user_text_with_its_own_preface() -> None:
    summary = Message.user("Tried plan B.", type="branch_summary")
    (converted,) = default_convert_to_llm([summary])
    preface, rest = converted.content[0].text.split("\n", 1)
    assert "branch" in preface.lower()
    assert rest == "<summary>\nTried plan B.\n</summary>"
    (compaction,) = default_convert_to_llm([summary.clone(type="compaction")])
    assert compaction.content[0].text.split("\n", 1)[0] != preface


def test_custom_messages_are_skipped() -> None:
    messages = [Message.user("q"), Message.user("note", type="custom"), Message.assistant("a")]
    assert default_convert_to_llm(messages) == [messages[0], messages[2]]


def test_convert_keeps_the_order_of_everything_it_keeps() -> None:
    messages = [
        Message.user("old", type="compaction"),
        Message.user("q"),
        Message.assistant("x", type="custom"),
        Message.assistant("a"),
    ]
    roles_and_text = [(m.role, m.text) for m in default_convert_to_llm(messages)]
    assert [text for _, text in roles_and_text][1:] == ["q", "a"]
    assert roles_and_text[0][1].endswith("<summary>\nold\n</summary>")


def test_convert_validates_dict_input() -> None:
    (converted,) = default_convert_to_llm([{"role": "user", "content": []}])
    assert converted == Message("user", ())
    assert_invalid(lambda: default_convert_to_llm([{"role": "bot"}]), "messages[0].role")


# -- normalize_tool_call_history --------------------------------------------------


def test_interrupted_result_text_is_exact() -> None:
    assert interrupted_result(call("c1", "fetch")) == ToolResultBlock(
        "c1", "Tool call fetch was interrupted before it produced a result.", is_error=True
    )


def test_a_paired_history_comes_back_unchanged() -> None:
    history = [
        Message.user("q"),
        Message.assistant("a", call("c1"), call("c2")),
        Message.user(result("c1"), result("c2"), "thanks"),
        Message.assistant("done"),
    ]
    normalized = normalize_tool_call_history(history)
    assert normalized == history
    assert all(a is b for a, b in zip(normalized, history, strict=True))


def test_calls_at_the_end_get_a_new_user_message_with_interrupted_results() -> None:
    history = [Message.user("q"), Message.assistant(call("c1"), call("c2", "fetch"))]
    assert normalize_tool_call_history(history) == [
        *history,
        Message.user(interrupted("c1"), interrupted("c2", "fetch")),
    ]


def test_calls_followed_by_an_assistant_message_get_a_user_message_between() -> None:
    history = [Message.assistant(call("c1")), Message.assistant("later")]
    assert normalize_tool_call_history(history) == [
        history[0],
        Message.user(interrupted("c1")),
        history[1],
    ]


def test_calls_followed_by_a_system_message_get_a_user_message_between() -> None:
    history = [Message.assistant(call("c1")), Message.system("s")]
    assert normalize_tool_call_history(history) == [
        history[0],
        Message.user(interrupted("c1")),
        history[1],
    ]


def test_missing_results_are_filled_in_call_order() -> None:
    history = [
        Message.assistant(call("c1"), call("c2"), call("c3")),
        Message.user(result("c2")),
    ]
    (_, answer) = normalize_tool_call_history(history)
    assert answer.content == (interrupted("c1"), result("c2"), interrupted("c3"))


def test_results_come_first_in_call_order_then_other_blocks_in_order() -> None:
    history = [
        Message.assistant(call("c1"), call("c2")),
        Message.user("before", result("c2"), IMAGE, result("c1"), "after", id="u1"),
    ]
    (_, answer) = normalize_tool_call_history(history)
    assert answer.content == (
        result("c1"),
        result("c2"),
        TextBlock("before"),
        IMAGE,
        TextBlock("after"),
    )
    assert answer.id == "u1"


def test_a_duplicate_result_for_one_call_keeps_the_first() -> None:
    history = [
        Message.assistant(call("c1")),
        Message.user(result("c1", "first"), result("c1", "second")),
    ]
    (_, answer) = normalize_tool_call_history(history)
    assert answer.content == (result("c1", "first"),)


def test_orphan_results_are_dropped() -> None:
    history = [
        Message.assistant(call("c1")),
        Message.user(result("c1"), result("ghost"), "text"),
    ]
    (_, answer) = normalize_tool_call_history(history)
    assert answer.content == (result("c1"), TextBlock("text"))


def test_a_user_message_left_empty_by_dropping_orphans_is_dropped() -> None:
    history = [Message.user("q"), Message.user(result("ghost")), Message.assistant("a")]
    assert normalize_tool_call_history(history) == [history[0], history[2]]


def test_an_orphan_next_to_other_blocks_leaves_those_blocks() -> None:
    history = [Message.assistant("no calls"), Message.user(result("ghost"), "hello")]
    assert normalize_tool_call_history(history) == [history[0], Message.user("hello")]


def test_a_user_message_that_was_empty_already_is_kept() -> None:
    history = [Message.user(), Message.assistant("a")]
    assert normalize_tool_call_history(history) == history


def test_results_answer_only_the_assistant_message_right_before() -> None:
    history = [
        Message.assistant(call("c1")),
        Message.user(result("c1")),
        Message.assistant("no calls"),
        Message.user(result("c1", "late"), "q"),
        Message.assistant(call("c2")),
        Message.user("filler"),
        Message.user(result("c2")),
    ]
    assert normalize_tool_call_history(history) == [
        history[0],
        history[1],
        history[2],
        Message.user("q"),
        history[4],
        Message.user(interrupted("c2"), "filler"),
    ]


def test_results_in_a_later_user_message_do_not_answer_earlier_calls() -> None:
    history = [
        Message.assistant(call("c1")),
        Message.user("wait"),
        Message.user(result("c1")),
    ]
    assert normalize_tool_call_history(history) == [
        history[0],
        Message.user(interrupted("c1"), "wait"),
    ]


def test_assistant_text_without_calls_needs_no_answer() -> None:
    history = [Message.assistant("a"), Message.assistant("b")]
    assert normalize_tool_call_history(history) == history


def test_normalize_is_idempotent_and_leaves_its_input_unchanged() -> None:
    history = [
        Message.user(result("ghost")),
        Message.assistant(call("c1"), call("c2")),
        Message.user("x", result("c2"), result("c2", "again")),
        Message.assistant(call("c3")),
    ]
    before = [m.to_dict() for m in history]
    once = normalize_tool_call_history(history)
    assert normalize_tool_call_history(once) == once
    assert [m.to_dict() for m in history] == before


def test_normalize_accepts_and_validates_dicts() -> None:
    wire = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c", "name": "f", "input": {}}],
        }
    ]
    normalized = normalize_tool_call_history(wire)
    assert normalized[1] == Message.user(interrupted("c", "f"))
    assert wire[0]["content"][0]["input"] == {}
    assert_invalid(lambda: normalize_tool_call_history("nope"), "messages")
