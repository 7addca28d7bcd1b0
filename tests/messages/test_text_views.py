"""message_text_body for people, collapse_for_llm for models."""

from __future__ import annotations

from turnkit import (
    Base64Source,
    CacheControl,
    FileBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
    collapse_for_llm,
    message_text_body,
)

URL_IMAGE = ImageBlock(UrlSource("https://a.example/cat.png"))
PNG_IMAGE = ImageBlock(Base64Source("image/png", "aGk="))
PDF = FileBlock(UrlSource("https://a.example/a.pdf"), "a.pdf")


# -- message_text_body ------------------------------------------------------------


def test_text_body_shows_every_block_kind_on_its_own_lines() -> None:
    message = Message.assistant(
        "Let me look.",
        ThinkingBlock("step 1\nstep 2"),
        URL_IMAGE,
        PNG_IMAGE,
        ToolUseBlock("c1", "search", {"q": "café", "n": [1]}),
    )
    assert message_text_body(message) == (
        "Let me look.\n"
        "<thinking>\nstep 1\nstep 2\n</thinking>\n"
        "[image] https://a.example/cat.png\n"
        "[image] image/png\n"
        '-> tool_call(search): {"q": "café", "n": [1]}'
    )


def test_text_body_shows_tool_results_and_their_parts() -> None:
    message = Message.user(
        ToolResultBlock("c1", "42"),
        ToolResultBlock("c2", [TextBlock("see"), PNG_IMAGE]),
        ToolResultBlock("c3", "failed", is_error=True),
    )
    assert message_text_body(message) == (
        "<- tool_result(c1): 42\n"
        "<- tool_result(c2): see\n[image] image/png\n"
        "<- tool_result(c3): failed"
    )


def test_text_body_keeps_text_as_is_and_names_files() -> None:
    assert message_text_body(Message.user("  raw <b>text</b>  ", PDF)) == (
        "  raw <b>text</b>  \n[file] a.pdf"
    )
    assert message_text_body(Message.user()) == ""


# -- collapse_for_llm ---------------------------------------------------------------


def test_adjacent_text_is_joined_with_newlines_keeping_the_first_cache() -> None:
    message = Message.user(
        TextBlock("a", CacheControl("1h")), TextBlock("b"), TextBlock("c", CacheControl("5m"))
    )
    assert collapse_for_llm(message).content == (TextBlock("a\nb\nc", CacheControl("1h")),)


def test_a_first_block_without_cache_gives_a_joined_block_without_cache() -> None:
    message = Message.user("a", TextBlock("b", CacheControl("5m")))
    assert collapse_for_llm(message).content == (TextBlock("a\nb"),)


def test_images_files_and_tool_blocks_stay_in_place_and_split_text_runs() -> None:
    call = ToolUseBlock("c1", "f", {})
    message = Message.assistant("a", "b", URL_IMAGE, "c", PDF, "d", "e", call, "f")
    assert collapse_for_llm(message).content == (
        TextBlock("a\nb"),
        URL_IMAGE,
        TextBlock("c"),
        PDF,
        TextBlock("d\ne"),
        call,
        TextBlock("f"),
    )


def test_thinking_is_dropped_and_the_text_around_it_joined_once() -> None:
    message = Message.assistant(ThinkingBlock("x"), "a", ThinkingBlock("y", "sig"), "b")
    assert collapse_for_llm(message).content == (TextBlock("a\nb"),)


def test_thinking_stays_as_it_is_when_included() -> None:
    thinking = ThinkingBlock("y", "sig", redacted=True)
    message = Message.assistant("a", "b", thinking, "c")
    assert collapse_for_llm(message, include_thinking=True).content == (
        TextBlock("a\nb"),
        thinking,
        TextBlock("c"),
    )


def test_tool_results_in_user_messages_are_kept() -> None:
    result = ToolResultBlock("c1", [TextBlock("x"), TextBlock("y")])
    message = Message.user(result, "a", "b")
    assert collapse_for_llm(message).content == (result, TextBlock("a\nb"))


def test_nothing_to_change_returns_the_same_message() -> None:
    for message in (
        Message.user("only"),
        Message.user(),
        Message.assistant("a", URL_IMAGE, "b"),
        Message.assistant("a", ThinkingBlock("t")),
    ):
        include = any(isinstance(b, ThinkingBlock) for b in message.content)
        assert collapse_for_llm(message, include_thinking=include) is message


def test_collapse_keeps_the_other_fields_and_leaves_the_input_alone() -> None:
    message = Message.assistant(
        "a", "b", id="m1", metadata={"k": 1}, origin={"provider": "p", "model": "m"}
    )
    collapsed = collapse_for_llm(message)
    assert (collapsed.id, collapsed.metadata, collapsed.origin) == (
        "m1",
        {"k": 1},
        message.origin,
    )
    assert message.content == (TextBlock("a"), TextBlock("b"))


def test_collapse_never_duplicates_text() -> None:
    message = Message.assistant("x", "x", ThinkingBlock("x"), "x")
    assert collapse_for_llm(message).text == "x\nx\nx"
    assert collapse_for_llm(message, include_thinking=True).text == "x\nxx"
