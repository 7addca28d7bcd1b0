"""FakeAnthropic, driven by the official ``anthropic`` SDK."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from . import ErrorReply, FakeAnthropic, Reply, Text, Thinking, ToolCall
from .anthropic import thinking_signature

MODEL = "claude-sonnet-4-6"
THINKING = {"type": "enabled", "budget_tokens": 1024}


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def client(fake: FakeAnthropic) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.base_url, api_key="test", max_retries=0, timeout=5)


def create(client: anthropic.Anthropic, messages: list[dict[str, Any]], **extra: Any) -> Any:
    return client.messages.create(model=MODEL, max_tokens=256, messages=messages, **extra)


def refusal(client: anthropic.Anthropic, messages: list[dict[str, Any]], **extra: Any) -> str:
    with pytest.raises(anthropic.BadRequestError) as caught:
        create(client, messages, **extra)
    body = caught.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    return str(body["error"]["message"])


def user(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "content": text}


def tool_turn(tool_id: str = "toolu_1", thinking: bool = False) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = []
    if thinking:
        signature = thinking_signature(MODEL, "plan")
        content.append({"type": "thinking", "thinking": "plan", "signature": signature})
    content.append({"type": "tool_use", "id": tool_id, "name": "add", "input": {"a": 1}})
    result = {"type": "tool_result", "tool_use_id": tool_id, "content": "2"}
    return [
        user(),
        {"role": "assistant", "content": content},
        {"role": "user", "content": [result]},
    ]


def test_text_reply_parses_from_json(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.script(Reply("Hello there", usage=(12, 3)))
    message = create(client, [user()])
    assert message.content[0].text == "Hello there"
    assert message.stop_reason == "end_turn"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (12, 3)
    assert message.id.startswith("msg_")
    assert fake.requests[0].body["messages"] == [user()]
    assert fake.requests[0].path == "/v1/messages"


def test_thinking_and_tool_call_parse_from_json(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script(Reply([Thinking("let me add"), ToolCall("add", {"a": 1, "b": 2})]))
    message = create(client, [user()], thinking=THINKING)
    thinking, tool_use = message.content
    assert thinking.type == "thinking" and thinking.thinking == "let me add"
    assert thinking.signature == thinking_signature(MODEL, "let me add")
    assert tool_use.type == "tool_use" and tool_use.input == {"a": 1, "b": 2}
    assert tool_use.id.startswith("toolu_01") and len(tool_use.id) == 30
    assert message.stop_reason == "tool_use"


def test_stream_accumulates_text_thinking_and_tool_input(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    reply = Reply(
        [
            Thinking("think " * 5),
            Text("Calling the adder now."),
            ToolCall("add", {"a": 40, "b": 2}),
        ],
        usage=(30, 17),
    )
    fake.script(reply)
    with client.messages.stream(
        model=MODEL, max_tokens=256, messages=[user()], thinking=THINKING
    ) as stream:
        kinds = {event.type for event in stream}
        message = stream.get_final_message()
    assert {"message_start", "content_block_start", "content_block_stop", "message_stop"} <= kinds
    thinking, text, tool_use = message.content
    assert thinking.thinking == "think " * 5
    assert thinking.signature == thinking_signature(MODEL, "think " * 5)
    assert text.text == "Calling the adder now."
    assert tool_use.input == {"a": 40, "b": 2}
    assert message.stop_reason == "tool_use"
    assert message.usage.output_tokens == 17
    assert fake.requests[0].body["stream"] is True


def test_raw_stream_has_the_real_delta_types(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script(Reply([Thinking("t"), Text("x"), ToolCall("f", {"k": "v"})]))
    events = list(create(client, [user()], stream=True, thinking=THINKING))
    deltas = [e.delta.type for e in events if e.type == "content_block_delta"]
    assert list(dict.fromkeys(deltas)) == [
        "thinking_delta",
        "signature_delta",
        "text_delta",
        "input_json_delta",
    ]
    assert events[-2].type == "message_delta" and events[-1].type == "message_stop"


def test_issued_history_is_accepted_on_replay(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script(Reply([Thinking("plan"), ToolCall("add", {"a": 1})]), Reply("3"))
    first = create(client, [user()], thinking=THINKING)
    assistant = {"role": "assistant", "content": [b.model_dump() for b in first.content]}
    result = {"type": "tool_result", "tool_use_id": first.content[1].id, "content": "3"}
    second = create(
        client, [user(), assistant, {"role": "user", "content": [result]}], thinking=THINKING
    )
    assert second.content[0].text == "3"


def test_redacted_and_unsigned_thinking_on_replay(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script(
        Reply([Thinking("secret", redacted=True), ToolCall("add", {})]),
        Reply("fine"),
        Reply([Thinking("cut off", signature=None), ToolCall("add", {})]),
    )
    first = create(client, [user()], thinking=THINKING)
    assert first.content[0].type == "redacted_thinking"
    content = [b.model_dump() for b in first.content]
    result = {"type": "tool_result", "tool_use_id": first.content[1].id, "content": "1"}
    history = [
        user(),
        {"role": "assistant", "content": content},
        {"role": "user", "content": [result]},
    ]
    assert create(client, history, thinking=THINKING).content[0].text == "fine"
    content[0]["data"] = content[0]["data"][:-8] + "AAAAAAA="
    assert refusal(client, history, thinking=THINKING) == (
        "messages.1.content.0: Invalid `data` in `redacted_thinking` block"
    )
    unsigned = create(client, [user()], thinking=THINKING)
    assert unsigned.content[0].signature == ""
    history[1] = {"role": "assistant", "content": [b.model_dump() for b in unsigned.content]}
    history[2]["content"][0]["tool_use_id"] = unsigned.content[1].id
    assert refusal(client, history, thinking=THINKING) == (
        "messages.1.content.0: Invalid `signature` in `thinking` block"
    )


def test_interleaved_tool_loop_needs_thinking_only_at_turn_start(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script(Reply("done"))
    second = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t2", "name": "f", "input": {}}],
    }
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "ok"}],
    }
    messages = [*tool_turn(thinking=True), second, result]
    assert create(client, messages, thinking=THINKING).content[0].text == "done"


def test_refuses_tool_use_without_result(client: anthropic.Anthropic) -> None:
    messages = [
        user(),
        {"role": "assistant", "content": tool_turn("toolu_9")[1]["content"]},
        user("next"),
    ]
    assert refusal(client, messages) == (
        "messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: "
        "toolu_9. Each `tool_use` block must have a corresponding `tool_result` block in the "
        "next message."
    )


def test_refuses_unexpected_tool_result(client: anthropic.Anthropic) -> None:
    stray = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "1"}],
    }
    assert refusal(client, [stray]) == (
        "messages.0.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_x. "
        "Each `tool_result` block must have a corresponding `tool_use` block in the previous "
        "message."
    )


def test_refuses_tool_result_after_text(client: anthropic.Anthropic) -> None:
    messages = tool_turn()
    messages[2]["content"].insert(0, {"type": "text", "text": "first"})
    assert refusal(client, messages).startswith(
        "messages.2: Did not find 1 `tool_result` block(s) at the beginning of this message."
    )


def test_refuses_tool_loop_without_leading_thinking(client: anthropic.Anthropic) -> None:
    message = refusal(client, tool_turn(), thinking=THINKING)
    assert message.startswith(
        "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
        "`tool_use`. When `thinking` is enabled, a final `assistant` message must start with a "
        "thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks)."
    )


@pytest.mark.parametrize(
    "signature", ["", "bWFkZSB1cA==", thinking_signature("claude-opus-4-1", "plan")]
)
def test_refuses_foreign_empty_or_made_up_signature(
    client: anthropic.Anthropic, signature: str
) -> None:
    messages = tool_turn(thinking=True)
    messages[1]["content"][0]["signature"] = signature
    assert refusal(client, messages, thinking=THINKING) == (
        "messages.1.content.0: Invalid `signature` in `thinking` block"
    )


def test_refuses_thinking_in_final_assistant_when_disabled(client: anthropic.Anthropic) -> None:
    prefill = {"role": "assistant", "content": tool_turn(thinking=True)[1]["content"][:1]}
    assert refusal(client, [user(), prefill]).startswith(
        "messages.1.content.0: When thinking is disabled, an `assistant` message in the final "
        "position cannot contain `thinking`."
    )


@pytest.mark.parametrize(
    ("tool_id", "text"),
    [
        ("call|item", "String should match pattern '^[a-zA-Z0-9_-]+$'"),
        ("x" * 65, "String should have at most 64 characters"),
    ],
)
def test_refuses_bad_tool_use_ids(client: anthropic.Anthropic, tool_id: str, text: str) -> None:
    assert refusal(client, tool_turn(tool_id)) == f"messages.1.content.0.tool_use.id: {text}"


def test_refuses_roles_other_than_user_and_assistant(client: anthropic.Anthropic) -> None:
    assert refusal(client, [{"role": "system", "content": "be nice"}, user()]) == (
        'messages: Unexpected role "system". The Messages API accepts a top-level `system` '
        'parameter, not "system" as an input message role.'
    )
    assert refusal(client, [{"role": "tool", "content": "x"}]) == (
        "messages.0.role: Input should be 'user' or 'assistant'"
    )


def test_refuses_empty_content_and_empty_text(client: anthropic.Anthropic) -> None:
    assert refusal(client, [user(""), {"role": "assistant", "content": "a"}, user()]) == (
        "messages.0: all messages must have non-empty content except for the optional final "
        "assistant message"
    )
    empty = {"role": "user", "content": [{"type": "text", "text": ""}]}
    assert refusal(client, [empty]) == "messages: text content blocks must be non-empty"
    blank = {"role": "user", "content": [{"type": "text", "text": "  \n"}]}
    assert (
        refusal(client, [blank]) == "messages: text content blocks must contain non-whitespace text"
    )


def test_accepts_empty_final_assistant_prefill(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.script(Reply("ok"))
    assert create(client, [user(), {"role": "assistant", "content": ""}]).content[0].text == "ok"


def test_image_source_rules(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    def image(source: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "role": "user",
                "content": [{"type": "image", "source": source}, {"type": "text", "text": "?"}],
            }
        ]

    bmp = {"type": "base64", "media_type": "image/bmp", "data": "AAAA"}
    assert refusal(client, image(bmp)) == (
        "messages.0.content.0.image.source.base64.media_type: Input should be 'image/jpeg', "
        "'image/png', 'image/gif' or 'image/webp'"
    )
    nested = tool_turn()
    nested[2]["content"][0]["content"] = [{"type": "image", "source": bmp}]
    assert refusal(client, nested).startswith(
        "messages.2.content.0.tool_result.content.0.image.source.base64.media_type:"
    )
    fake.script(Reply("a png"), Reply("a url"))
    create(client, image({"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}))
    create(client, image({"type": "url", "url": "https://example.com/cat.png"}))
    assert refusal(client, image({"type": "url", "url": "ftp://x"})).endswith(
        "Input should be a valid URL"
    )


def test_requires_max_tokens(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.post("/v1/messages", body={"model": MODEL, "messages": [user()]}, cast_to=object)
    assert caught.value.body["error"]["message"] == "max_tokens: Field required"  # type: ignore[index]


def test_cache_control_shape_and_count(client: anthropic.Anthropic) -> None:
    def marked(cache_control: dict[str, Any], count: int = 1) -> list[dict[str, Any]]:
        block = {"type": "text", "text": "x", "cache_control": cache_control}
        return [{"role": "user", "content": [block] * count}]

    assert refusal(client, marked({"type": "persistent"})) == (
        "messages.0.content.0.text.cache_control.type: Input should be 'ephemeral'"
    )
    assert refusal(client, marked({"type": "ephemeral", "ttl": "2h"})).endswith(
        "Input should be '5m' or '1h'"
    )
    assert refusal(client, marked({"type": "ephemeral"}, 5)) == (
        "A maximum of 4 blocks with cache_control may be provided. Found 5."
    )


def test_auth_errors(fake: FakeAnthropic) -> None:
    wrong = anthropic.Anthropic(base_url=fake.base_url, api_key="nope", max_retries=0, timeout=5)
    with pytest.raises(anthropic.AuthenticationError) as caught:
        create(wrong, [user()])
    assert caught.value.body["error"] == {
        "type": "authentication_error",
        "message": "invalid x-api-key",
    }  # type: ignore[index]
    request = urllib.request.Request(
        fake.base_url + "/v1/messages", data=b"{}", headers={"content-type": "application/json"}
    )
    with pytest.raises(urllib.error.HTTPError) as raw:
        urllib.request.urlopen(request, timeout=5)
    assert raw.value.code == 401
    assert json.loads(raw.value.read())["error"]["message"] == "x-api-key header is required"
    assert fake.pending == 0


def test_scripted_errors_reach_the_sdk(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.script(ErrorReply(429, "slow down", {"retry-after": "7"}), ErrorReply(529, ""))
    with pytest.raises(anthropic.RateLimitError) as limited:
        create(client, [user()])
    assert limited.value.response.headers["retry-after"] == "7"
    assert limited.value.body["error"] == {"type": "rate_limit_error", "message": "slow down"}  # type: ignore[index]
    with pytest.raises(anthropic.APIStatusError) as overloaded:
        create(client, [user()])
    assert overloaded.value.status_code == 529
    assert overloaded.value.body["error"]["type"] == "overloaded_error"  # type: ignore[index]


def test_exhausted_script_answers_a_clear_500(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    with pytest.raises(anthropic.InternalServerError) as caught:
        create(client, [user()])
    assert "script exhausted" in caught.value.body["error"]["message"]  # type: ignore[index]
