"""OpenAIChatModel through the official SDK against the strict loopback fake."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion

from fakes import ErrorReply, FakeOpenAIChat, Reply, Text, Thinking, ToolCall
from providers.streamed_tools import check_tool_input_streams_in_pieces
from turnkit import ImageBlock, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from turnkit.errors import ProviderError, UnsupportedContentError
from turnkit.messages import FileBlock, Origin, thaw
from turnkit.providers import ModelRequest, ModelSettings, ToolSpec, resolve_model
from turnkit.providers.openai_chat import OpenAIChatModel

MODEL = "gpt-4.1"
PNG = "iVBORw0KGgo="


@pytest.fixture
def fake() -> Iterator[FakeOpenAIChat]:
    with FakeOpenAIChat() as server:
        yield server


@pytest.fixture
def model(fake: FakeOpenAIChat) -> OpenAIChatModel:
    return OpenAIChatModel(MODEL, base_url=fake.base_url + "/v1", api_key="test", max_retries=0)


def request(*messages: Message, **settings: Any) -> ModelRequest:
    tools = (ToolSpec("add", "Adds numbers", {"type": "object", "properties": {}}),)
    return ModelRequest(tuple(messages), tools=tools, settings=ModelSettings(**settings))


def image(data: str = PNG) -> ImageBlock:
    return ImageBlock({"type": "base64", "media_type": "image/png", "data": data})


async def test_text_reply_with_usage_origin_and_system(
    fake: FakeOpenAIChat, model: OpenAIChatModel
) -> None:
    fake.script(Reply("Paris.", usage=(12, 3)))
    response = await model.request(request(Message.system("Be brief."), Message.user("Capital?")))
    assert response.text == "Paris."
    assert response.message.origin == Origin("openai", MODEL)
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert response.stop_reason == "end_turn" and response.raw_stop_reason == "stop"
    assert fake.last_body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital?"},
    ]
    assert fake.last_body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "add",
            "parameters": {"type": "object", "properties": {}},
            "description": "Adds numbers",
        },
    }


async def test_settings_reach_the_wire(fake: FakeOpenAIChat, model: OpenAIChatModel) -> None:
    fake.script(Reply("ok"))
    settings = {"max_output_tokens": 99, "temperature": 0.2, "thinking": "high"}
    await model.request(request(Message.user("hi"), **settings))
    body = fake.last_body
    assert (body["max_completion_tokens"], body["temperature"]) == (99, 0.2)
    assert body["reasoning_effort"] == "high" and "max_tokens" not in body


async def test_tool_call_round_trip(fake: FakeOpenAIChat, model: OpenAIChatModel) -> None:
    fake.script(Reply([ToolCall("add", {"a": 1, "b": 2})]), Reply("3"))
    first = await model.request(request(Message.user("1+2?")))
    assert first.stop_reason == "tool_use"
    call = first.tool_calls[0]
    assert (call.name, dict(call.input)) == ("add", {"a": 1, "b": 2})
    answer = Message.user(ToolResultBlock(call.id, "3"))
    second = await model.request(request(Message.user("1+2?"), first.message, answer))
    assert second.text == "3"
    sent = fake.last_body["messages"]
    assert sent[1]["content"] is None
    assert sent[1]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 1, "b": 2}'}
    assert sent[2] == {"role": "tool", "tool_call_id": call.id, "content": "3"}


async def test_foreign_ids_are_mapped_consistently_and_history_keeps_them(
    fake: FakeOpenAIChat, model: OpenAIChatModel
) -> None:
    long_id = "toolu_" + "x" * 60
    odd = "call_1|fc_" + "y" * 70
    history = (
        Message.user("go"),
        Message.assistant(ToolUseBlock(long_id, "add", {}), ToolUseBlock(odd, "add", {})),
        Message.user(ToolResultBlock(long_id, "1"), ToolResultBlock(odd, [TextBlock("2")])),
    )
    fake.script(Reply("done"))
    assert (await model.request(request(*history))).text == "done"
    sent = fake.last_body["messages"]
    call_ids = [c["id"] for c in sent[1]["tool_calls"]]
    result_ids = [m["tool_call_id"] for m in sent[2:4]]
    assert call_ids == result_ids and all(len(i) <= 40 for i in call_ids)
    assert call_ids[1] == "call_1"
    assert history[1].content[0].id == long_id and history[2].content[1].tool_use_id == odd


ids = st.lists(
    st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=90),
    min_size=1,
    max_size=6,
    unique=True,
)


@given(originals=ids, style=st.sampled_from(["openai", "nine"]))
def test_any_ids_map_to_distinct_valid_ids_shared_by_calls_and_results(
    originals: list[str], style: str
) -> None:
    history = (
        Message.user("go"),
        Message.assistant(*(ToolUseBlock(i, "add", {}) for i in originals)),
        Message.user(*(ToolResultBlock(i, "ok") for i in originals)),
    )
    model = OpenAIChatModel(MODEL, api_key="k", tool_id_style=style)  # type: ignore[arg-type]
    sent = asyncio.run(model.build_params(request(*history)))["messages"]
    call_ids = [c["id"] for c in sent[1]["tool_calls"]]
    assert call_ids == [m["tool_call_id"] for m in sent[2:]]
    assert len(set(call_ids)) == len(originals)
    valid = re.compile(r"[A-Za-z0-9]{9}" if style == "nine" else r".{1,40}", re.DOTALL)
    assert all(valid.fullmatch(i) for i in call_ids)


async def test_nine_char_ids_and_role_order_for_mistral_like_servers() -> None:
    with FakeOpenAIChat(strict_mistral=True) as fake:
        model = OpenAIChatModel(
            "mistral-large", base_url=fake.base_url + "/v1", api_key="test", tool_id_style="nine"
        )
        fake.script(Reply([ToolCall("add", {"a": 1})]), Reply("two"), Reply("three"))
        first = await model.request(request(Message.user("go")))
        call = first.tool_calls[0]
        result = Message.user(ToolResultBlock(call.id, "1"))
        assert (await model.request(request(Message.user("go"), first.message, result))).text
        assert fake.last_body["messages"][2]["tool_call_id"] == call.id
        foreign = (
            Message.user("go"),
            Message.assistant(ToolUseBlock("call_abc123", "add", {})),
            Message.user(ToolResultBlock("call_abc123", "1"), "and now?"),
        )
        assert (await model.request(request(*foreign, max_output_tokens=50))).text == "three"
    sent = fake.last_body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert len(sent[2]["tool_call_id"]) == 9 and sent[2]["tool_call_id"].isalnum()
    assert fake.last_body["max_tokens"] == 50 and "max_completion_tokens" not in fake.last_body


async def test_images_and_pdfs_in_user_messages(
    fake: FakeOpenAIChat, model: OpenAIChatModel
) -> None:
    url = ImageBlock({"type": "url", "url": "https://example.com/cat.png"})
    pdf = FileBlock(
        {"type": "base64", "media_type": "application/pdf", "data": "JVBERg=="}, "a.pdf"
    )
    fake.script(Reply("seen"))
    await model.request(request(Message.user("look", image(), url, pdf)))
    assert fake.last_body["messages"][0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {
            "type": "file",
            "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERg=="},
        },
    ]


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ({"type": "base64", "media_type": "application/zip", "data": "UEs="}, "application/zip"),
        ({"type": "url", "url": "https://example.com/a.pdf"}, "not by URL"),
    ],
)
async def test_unsupported_files_are_a_clear_error(
    fake: FakeOpenAIChat, model: OpenAIChatModel, source: dict[str, str], match: str
) -> None:
    with pytest.raises(UnsupportedContentError, match=match):
        await model.request(request(Message.user(FileBlock(source, "a.file"))))
    assert fake.requests == []


async def test_image_from_a_tool_result_moves_to_a_following_user_message(
    fake: FakeOpenAIChat, model: OpenAIChatModel
) -> None:
    history = (
        Message.user("screenshot please"),
        Message.assistant(ToolUseBlock("call_1", "shot", {}), ToolUseBlock("call_2", "add", {})),
        Message.user(
            ToolResultBlock("call_1", [TextBlock("here"), image()]),
            ToolResultBlock("call_2", "3"),
            "what do you see?",
        ),
    )
    fake.script(Reply("a dot"))
    assert (await model.request(request(*history))).text == "a dot"
    sent = fake.last_body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]
    assert sent[2]["content"].startswith("here\n[1 attachment")
    assert sent[4]["content"] == [
        {"type": "text", "text": "Attachments from tool result call_1:"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        {"type": "text", "text": "what do you see?"},
    ]


async def test_foreign_thinking_is_dropped_or_sent_as_text(
    fake: FakeOpenAIChat, model: OpenAIChatModel
) -> None:
    foreign = Message.assistant(
        ThinkingBlock("hmm", "sig-from-elsewhere"), "Hi", origin=Origin("anthropic", "claude")
    )
    fake.script(Reply("a"), Reply("b"))
    await model.request(request(Message.user("q"), foreign, Message.user("more")))
    assert fake.last_body["messages"][1] == {"role": "assistant", "content": "Hi"}
    await model.request(
        request(Message.user("q"), foreign, Message.user("more"), thinking_replay="text")
    )
    assert fake.last_body["messages"][1]["content"] == "<thinking>\nhmm\n</thinking>\nHi"


async def test_reasoning_content_is_parsed_and_echoed_only_when_asked(
    fake: FakeOpenAIChat, model: OpenAIChatModel
) -> None:
    fake.script(Reply([Thinking("let me add"), ToolCall("add", {})]), Reply("x"), Reply("y"))
    first = await model.request(request(Message.user("go")))
    assert first.message.content[0] == ThinkingBlock("let me add", "reasoning_content")
    history = (
        Message.user("go"),
        first.message,
        Message.user(ToolResultBlock(first.tool_calls[0].id, "1")),
    )
    await model.request(request(*history))
    assert "reasoning_content" not in fake.last_body["messages"][1]
    echoing = OpenAIChatModel(
        MODEL, base_url=model.client.base_url, api_key="test", echo_reasoning=True
    )
    await echoing.request(request(*history))
    assert fake.last_body["messages"][1]["reasoning_content"] == "let me add"


async def test_stream_gives_deltas_and_the_same_final_message(
    fake: FakeOpenAIChat, model: OpenAIChatModel
) -> None:
    reply = Reply(
        [
            Thinking("let me see this through"),
            Text("Hello there, streaming"),
            ToolCall("add", {"a": 1, "b": [1, 2, 3]}, id="call_x"),
            ToolCall("add", {"c": "long enough to split"}, id="call_y"),
        ],
        usage=(20, 7),
    )
    fake.script(reply, reply)
    whole = await model.request(request(Message.user("hi")))
    events = [e async for e in model.stream(request(Message.user("hi")))]
    assert fake.last_body["stream_options"] == {"include_usage": True}
    text = "".join(e.text for e in events if e.type == "text_delta")
    thinking = "".join(e.text for e in events if e.type == "thinking_delta")
    assert (text, thinking) == ("Hello there, streaming", "let me see this through")
    calls = [e.tool_call for e in events if e.type == "tool_use"]
    assert calls == list(whole.tool_calls) and [c.id for c in calls] == ["call_x", "call_y"]
    assert events[-1].type == "done"
    assert events[-1].response == whole


async def test_stream_gives_each_tool_calls_input_in_pieces_before_the_whole_call(
    fake: FakeOpenAIChat, model: OpenAIChatModel
) -> None:
    await check_tool_input_streams_in_pieces(
        fake, model, request(Message.user("hi")), ("call_x", "call_y")
    )


async def test_streamed_pieces_carry_the_fresh_id_a_repeated_call_id_gets(
    fake: FakeOpenAIChat, model: OpenAIChatModel
) -> None:
    calls = [ToolCall("add", {"a": 1}, id="call_x"), ToolCall("add", {"b": 2}, id="call_x")]
    fake.script(Reply(calls))
    events = [e async for e in model.stream(request(Message.user("hi")))]
    first, second = [e.tool_call for e in events if e.type == "tool_use"]
    assert first.id == "call_x" and second.id.startswith("call_") and second.id != "call_x"
    for final in (first, second):
        opened = ToolUseBlock(final.id, final.name, {})
        pieces = [e.text for e in events if e.type == "tool_input_delta" and e.tool_call == opened]
        assert json.loads("".join(pieces)) == thaw(final.input)
    assert [first, second] == list(events[-1].response.tool_calls)


def completion(message: dict[str, Any], finish: str = "stop") -> ChatCompletion:
    return ChatCompletion.model_validate(
        {
            "id": "c",
            "object": "chat.completion",
            "created": 0,
            "model": MODEL,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": 2,
                "total_tokens": 12,
                "prompt_tokens_details": {"cached_tokens": 4},
            },
        }
    )


def test_unusual_replies_are_parsed_without_crashing() -> None:
    def call(call_id: str | None, arguments: str) -> dict[str, Any]:
        return {
            "id": call_id,
            "type": "function",
            "function": {"name": "add", "arguments": arguments},
        }

    calls = [call("call_a", "{not json"), call("call_a", ""), call("", "[1]"), call("c", "NaN")]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    response = OpenAIChatModel(MODEL, api_key="k").parse(completion(message))
    inputs = [dict(c.input) for c in response.tool_calls]
    assert inputs == [
        {"_raw_arguments": "{not json"},
        {},
        {"_raw_arguments": "[1]"},
        {"_raw_arguments": "NaN"},
    ]
    assert len({c.id for c in response.tool_calls}) == 4
    assert response.stop_reason == "tool_use"  # a server that said "stop" after calls
    assert (response.usage.input_tokens, response.usage.cache_read_tokens) == (6, 4)


def test_a_model_refusal_is_text_with_stop_reason_refusal() -> None:
    message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    response = OpenAIChatModel(MODEL, api_key="k").parse(completion(message))
    assert (response.text, response.stop_reason) == ("I can't help with that.", "refusal")


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (401, False), (429, True), (500, True)]
)
async def test_errors_are_mapped_with_status_and_retryability(
    fake: FakeOpenAIChat, model: OpenAIChatModel, status: int, retryable: bool
) -> None:
    fake.script(ErrorReply(status, "scripted failure", {"retry-after": "2"}))
    with pytest.raises(ProviderError) as caught:
        await model.request(request(Message.user("hi")))
    error = caught.value
    assert (error.status, error.retryable, error.message) == (status, retryable, "scripted failure")
    assert error.retry_after == 2.0 and error.provider == "openai"


async def test_stream_errors_are_mapped_too(fake: FakeOpenAIChat, model: OpenAIChatModel) -> None:
    fake.script(ErrorReply(429, "slow down"))
    with pytest.raises(ProviderError) as caught:
        [e async for e in model.stream(request(Message.user("hi")))]
    assert (caught.value.status, caught.value.retryable) == (429, True)


async def test_real_refusal_texts_reach_the_caller(model: OpenAIChatModel) -> None:
    bad = OpenAIChatModel(
        MODEL, base_url=model.client.base_url, api_key="sk-wrong-1234", max_retries=0
    )
    with pytest.raises(ProviderError) as caught:
        await bad.request(request(Message.user("hi")))
    assert caught.value.status == 401
    assert caught.value.message.startswith("Incorrect API key provided: sk-")
    with FakeOpenAIChat(strict_mistral=True) as mistral:
        wrong_ids = OpenAIChatModel(
            "m", base_url=mistral.base_url + "/v1", api_key="test", max_retries=0
        )
        history = (
            Message.user("go"),
            Message.assistant(ToolUseBlock("call_abc123", "add", {})),
            Message.user(ToolResultBlock("call_abc123", "1")),
        )
        with pytest.raises(ProviderError) as refused:
            await wrong_ids.request(request(*history))
    assert (refused.value.status, refused.value.retryable) == (400, False)
    assert refused.value.message == (
        "Tool call id was call_abc123 but must be a-z, A-Z, 0-9, with a length of 9."
    )


async def test_connection_failure_is_retryable() -> None:
    with FakeOpenAIChat() as gone:
        base_url = gone.base_url + "/v1"
    model = OpenAIChatModel(MODEL, base_url=base_url, api_key="test", max_retries=0)
    with pytest.raises(ProviderError) as caught:
        await model.request(request(Message.user("hi")))
    assert caught.value.retryable and caught.value.status is None


async def test_ollama_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OLLAMA_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with FakeOpenAIChat(Reply("hello"), api_key="ollama") as fake:
        monkeypatch.setenv("OLLAMA_BASE_URL", fake.base_url + "/v1")
        model = resolve_model("ollama:llama3.2")
        response = await model.request(request(Message.user("hi"), max_output_tokens=20))
    assert response.message.origin == Origin("ollama", "llama3.2")
    assert fake.last_body["max_tokens"] == 20


async def test_a_missing_openai_key_is_a_provider_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="api_key"):
        await OpenAIChatModel(MODEL).request(request(Message.user("hi")))


async def test_rate_limits_are_retried_by_the_sdk(fake: FakeOpenAIChat) -> None:
    model = OpenAIChatModel(MODEL, base_url=fake.base_url + "/v1", api_key="test", max_retries=1)
    fake.script(ErrorReply(429, "slow down", headers={"retry-after-ms": "1"}), Reply("after all"))
    assert (await model.request(request(Message.user("hi")))).text == "after all"
    assert len(fake.requests) == 2
