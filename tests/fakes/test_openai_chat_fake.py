"""FakeOpenAIChat, driven by the official ``openai`` SDK."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from . import ErrorReply, FakeOpenAIChat, Reply, Text, Thinking, ToolCall

MODEL = "gpt-4.1"


@pytest.fixture
def fake() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat() as server:
        yield server


@pytest.fixture
def client(fake: FakeOpenAIChat) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.base_url + "/v1", api_key="test", max_retries=0, timeout=5)


def create(client: openai.OpenAI, messages: list[dict[str, Any]], **extra: Any) -> Any:
    return client.chat.completions.create(model=MODEL, messages=messages, **extra)  # type: ignore[arg-type]


def refusal(client: openai.OpenAI, messages: list[dict[str, Any]]) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as caught:
        create(client, messages)
    return caught.value


def text(error: openai.APIStatusError) -> str:
    """The error message exactly as the server sent it (the SDK prefixes its own)."""
    assert isinstance(error.body, dict)
    return str(error.body["message"])


def user(content: Any = "hi") -> dict[str, Any]:
    return {"role": "user", "content": content}


def assistant_calls(*ids: str) -> dict[str, Any]:
    calls = [
        {"id": i, "type": "function", "function": {"name": "add", "arguments": "{}"}} for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def tool(call_id: str, content: str = "2") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def test_text_reply_parses_from_json(fake: FakeOpenAIChat, client: openai.OpenAI) -> None:
    fake.script(Reply("Hello", usage=(11, 2)))
    completion = create(client, [user()])
    assert completion.choices[0].message.content == "Hello"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.total_tokens == 13
    assert fake.requests[0].path == "/v1/chat/completions"
    assert fake.requests[0].headers["authorization"] == "Bearer test"


def test_tool_calls_and_reasoning_parse_from_json(
    fake: FakeOpenAIChat, client: openai.OpenAI
) -> None:
    fake.script(
        Reply(
            [Thinking("hmm"), ToolCall("add", {"a": 1}), ToolCall("mul", {"b": 2}, id="call_given")]
        )
    )
    message = create(client, [user()]).choices[0].message
    first, second = message.tool_calls
    assert first.id.startswith("call_") and len(first.id) == 29
    assert (first.function.name, first.function.arguments) == ("add", '{"a": 1}')
    assert second.id == "call_given"
    assert message.model_extra["reasoning_content"] == "hmm"


def test_stream_yields_chunks_done_and_usage_only_when_asked(
    fake: FakeOpenAIChat, client: openai.OpenAI
) -> None:
    fake.script(
        Reply([Text("Hello streaming world"), ToolCall("add", {"a": 1, "b": 22})]), Reply("plain")
    )
    chunks = list(create(client, [user()], stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    arguments = "".join(
        c.choices[0].delta.tool_calls[0].function.arguments or ""
        for c in chunks
        if c.choices and c.choices[0].delta.tool_calls
    )
    assert text == "Hello streaming world"
    assert arguments == '{"a": 1, "b": 22}'
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 5
    plain = list(create(client, [user()], stream=True))
    assert all(c.usage is None for c in plain)


def test_raw_stream_ends_with_done(fake: FakeOpenAIChat) -> None:
    fake.script(Reply("x"))
    body = json.dumps({"model": MODEL, "messages": [user()], "stream": True}).encode()
    headers = {"authorization": "Bearer test", "content-type": "application/json"}
    request = urllib.request.Request(fake.base_url + "/v1/chat/completions", body, headers)
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.headers["content-type"] == "text/event-stream"
        raw = response.read().decode()
    assert raw.endswith("data: [DONE]\n\n")
    assert '"object": "chat.completion.chunk"' in raw


def test_stream_helper_accumulates(fake: FakeOpenAIChat, client: openai.OpenAI) -> None:
    fake.script(Reply([Text("ok "), ToolCall("add", {"a": 1})]))
    with client.chat.completions.stream(model=MODEL, messages=[user()]) as stream:  # type: ignore[list-item]
        final = stream.get_final_completion()
    assert final.choices[0].message.content == "ok "
    assert final.choices[0].message.tool_calls[0].function.arguments == '{"a": 1}'


def test_tool_round_trip_is_accepted(fake: FakeOpenAIChat, client: openai.OpenAI) -> None:
    fake.script(Reply("4"))
    messages = [
        user(),
        assistant_calls("call_a", "call_b"),
        tool("call_a"),
        tool("call_b"),
        user("and?"),
    ]
    assert create(client, messages).choices[0].message.content == "4"


def test_refuses_tool_message_without_tool_calls(client: openai.OpenAI) -> None:
    error = refusal(client, [user(), tool("call_a")])
    assert text(error) == (
        "Invalid parameter: messages with role 'tool' must be a response to a preceeding "
        "message with 'tool_calls'."
    )
    assert error.body == {
        "message": text(error),
        "type": "invalid_request_error",
        "param": "messages.[1].role",
        "code": None,
    }


def test_refuses_unanswered_tool_calls(client: openai.OpenAI) -> None:
    error = refusal(
        client, [user(), assistant_calls("call_a", "call_b"), tool("call_a"), user("x")]
    )
    assert text(error) == (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. The following tool_call_ids did not have response messages: call_b"
    )
    trailing = refusal(client, [user(), assistant_calls("call_c")])
    assert text(trailing).endswith("did not have response messages: call_c")


def test_refuses_tool_message_for_unknown_id(client: openai.OpenAI) -> None:
    error = refusal(client, [user(), assistant_calls("call_a"), tool("call_z")])
    assert text(error) == (
        "Invalid parameter: 'tool_call_id' of 'call_z' not found in 'tool_calls' of previous "
        "message."
    )


def test_refuses_tool_call_ids_over_40_characters(client: openai.OpenAI) -> None:
    long_id = "toolu_" + "x" * 40
    error = refusal(client, [user(), assistant_calls(long_id), tool(long_id)])
    assert text(error) == (
        "Invalid 'messages[1].tool_calls[0].id': string too long. Expected a string with maximum "
        "length 40, but got a string with length 46 instead."
    )
    assert error.code == "string_above_max_length"


def test_image_parts_only_in_user_messages(fake: FakeOpenAIChat, client: openai.OpenAI) -> None:
    def image(url: str) -> dict[str, Any]:
        return {"type": "image_url", "image_url": {"url": url}}

    fake.script(Reply("a cat"), Reply("a dot"))
    create(client, [user([{"type": "text", "text": "?"}, image("https://example.com/cat.png")])])
    create(client, [user([image("data:image/png;base64,iVBORw0KGgo=")])])
    error = refusal(
        client, [user(), {"role": "assistant", "content": [image("https://x/y.png")]}, user()]
    )
    assert text(error) == (
        "Invalid 'messages[1]'. Image URLs are only allowed for messages with role 'user', but "
        "this message with role 'assistant' contains an image URL."
    )
    in_tool = refusal(
        client,
        [user(), assistant_calls("call_a"), {**tool("call_a"), "content": [image("https://x")]}],
    )
    assert "this message with role 'tool' contains an image URL." in text(in_tool)
    bad_url = refusal(client, [user([image("file:///tmp/cat.png")])])
    assert text(bad_url).endswith("but got a value without the 'data:' prefix.")
    assert bad_url.param == "messages[0].content[0].image_url.url"


def test_content_part_types_per_role(client: openai.OpenAI) -> None:
    error = refusal(client, [{"role": "system", "content": [{"type": "input_audio"}]}, user()])
    assert text(error) == "Invalid value: 'input_audio'. Supported values are: 'text'."
    error = refusal(client, [user(), {"role": "assistant", "content": [{"type": "file"}]}, user()])
    assert text(error) == "Invalid value: 'file'. Supported values are: 'text' and 'refusal'."


def test_strict_mistral_ids_and_role_order() -> None:
    with FakeOpenAIChat(Reply([ToolCall("add", {})]), strict_mistral=True) as fake:
        client = openai.OpenAI(
            base_url=fake.base_url + "/v1", api_key="test", max_retries=0, timeout=5
        )
        call = create(client, [user()]).choices[0].message.tool_calls[0]
        assert len(call.id) == 9 and call.id.isalnum()
        error = refusal(client, [user(), assistant_calls("call_abc123"), tool("call_abc123")])
        assert (
            text(error)
            == "Tool call id was call_abc123 but must be a-z, A-Z, 0-9, with a length of 9."
        )
        error = refusal(client, [user(), assistant_calls(call.id), tool(call.id), user("more")])
        assert text(error) == "Unexpected role 'user' after role 'tool'"
        assert error.body["type"] == "invalid_request_message_order"  # type: ignore[index]


def test_auth_errors(fake: FakeOpenAIChat) -> None:
    wrong = openai.OpenAI(
        base_url=fake.base_url + "/v1", api_key="sk-wrong-key-1234", max_retries=0, timeout=5
    )
    with pytest.raises(openai.AuthenticationError) as caught:
        create(wrong, [user()])
    assert caught.value.code == "invalid_api_key"
    assert text(caught.value).startswith("Incorrect API key provided: sk-**********1234.")
    blank = wrong.with_options(default_headers={"Authorization": ""})
    with pytest.raises(openai.AuthenticationError) as missing:
        create(blank, [user()])
    assert text(missing.value).startswith("You didn't provide an API key.")


def test_scripted_errors_reach_the_sdk(fake: FakeOpenAIChat, client: openai.OpenAI) -> None:
    fake.script(ErrorReply(429, "", {"retry-after": "1"}), ErrorReply(500, "boom"))
    with pytest.raises(openai.RateLimitError) as limited:
        create(client, [user()])
    assert limited.value.code == "rate_limit_exceeded"
    assert limited.value.response.headers["retry-after"] == "1"
    with pytest.raises(openai.InternalServerError) as failed:
        create(client, [user()])
    assert text(failed.value) == "boom"
