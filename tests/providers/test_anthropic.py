"""AnthropicModel through the official SDK against the strict loopback fake."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes import ErrorReply, FakeAnthropic, Reply, Text, Thinking, ToolCall
from providers.streamed_tools import check_tool_input_streams_in_pieces
from turnkit import ImageBlock, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from turnkit.errors import ProviderError, UnsupportedContentError
from turnkit.messages import CacheControl, FileBlock, Origin
from turnkit.providers import ModelRequest, ModelSettings, ToolSpec
from turnkit.providers.anthropic import AnthropicModel

MODEL = "claude-sonnet-4-6"
PNG = "iVBORw0KGgo="


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def model(fake: FakeAnthropic) -> AnthropicModel:
    return AnthropicModel(MODEL, base_url=fake.base_url, api_key="test", max_retries=0)


def request(*messages: Message, **settings: object) -> ModelRequest:
    tools = (ToolSpec("add", "Adds numbers", {"type": "object", "properties": {}}),)
    return ModelRequest(tuple(messages), tools=tools, settings=ModelSettings(**settings))


async def test_text_reply_with_usage_and_origin(fake: FakeAnthropic, model: AnthropicModel) -> None:
    fake.script(Reply("Paris.", usage=(12, 3)))
    response = await model.request(request(Message.system("Be brief."), Message.user("Capital?")))
    assert response.text == "Paris."
    assert response.message.origin == Origin("anthropic", MODEL)
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert response.stop_reason == "end_turn"
    assert fake.last_body["system"] == "Be brief."
    assert [m["role"] for m in fake.last_body["messages"]] == ["user"]


async def test_tool_call_round_trip(fake: FakeAnthropic, model: AnthropicModel) -> None:
    fake.script(Reply([ToolCall("add", {"a": 1, "b": 2})]), Reply("3"))
    first = await model.request(request(Message.user("1+2?")))
    assert first.stop_reason == "tool_use"
    call = first.tool_calls[0]
    assert (call.name, dict(call.input)) == ("add", {"a": 1, "b": 2})
    answer = Message.user(ToolResultBlock(call.id, "3"))
    second = await model.request(request(Message.user("1+2?"), first.message, answer))
    assert second.text == "3"


async def test_foreign_ids_are_mapped_consistently_and_history_keeps_them(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    odd = "call|item:" + "x" * 80
    history = (
        Message.user("go"),
        Message.assistant(ToolUseBlock(odd, "add", {}), ToolUseBlock("fc.2", "add", {})),
        Message.user(ToolResultBlock(odd, "1"), ToolResultBlock("fc.2", "2")),
    )
    fake.script(Reply("done"))
    assert (await model.request(request(*history))).text == "done"
    sent = fake.last_body["messages"]
    call_ids = [b["id"] for b in sent[1]["content"]]
    result_ids = [b["tool_use_id"] for b in sent[2]["content"]]
    assert call_ids == result_ids and all(len(i) <= 64 for i in call_ids)
    assert history[1].content[0].id == odd


async def test_thinking_replays_natively_to_the_same_model(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    fake.script(Reply([Thinking("plan"), ToolCall("add", {})]), Reply("ok"))
    first = await model.request(request(Message.user("go"), thinking=1024))
    assert isinstance(first.message.content[0], ThinkingBlock)
    result = Message.user(ToolResultBlock(first.tool_calls[0].id, "1"))
    await model.request(request(Message.user("go"), first.message, result, thinking=1024))
    assert fake.last_body["messages"][1]["content"][0]["type"] == "thinking"
    assert fake.last_body["thinking"] == {"type": "enabled", "budget_tokens": 1024}


async def test_foreign_thinking_is_dropped_or_sent_as_text(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    foreign = Message.assistant(
        ThinkingBlock("hmm", "sig-from-elsewhere"), "Hi", origin=Origin("openai", "gpt-5")
    )
    fake.script(Reply("a"), Reply("b"))
    await model.request(request(Message.user("q"), foreign, Message.user("more")))
    assert fake.last_body["messages"][1]["content"] == [{"type": "text", "text": "Hi"}]
    await model.request(
        request(Message.user("q"), foreign, Message.user("more"), thinking_replay="text")
    )
    texts = [b["text"] for b in fake.last_body["messages"][1]["content"]]
    assert texts == ["<thinking>\nhmm\n</thinking>", "Hi"]


async def test_thinking_on_with_an_unsigned_open_tool_turn_is_not_refused(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    history = (
        Message.user("go"),
        Message.assistant(ToolUseBlock("t1", "add", {}), origin=Origin("openai", "gpt-5")),
        Message.user(ToolResultBlock("t1", "1")),
    )
    fake.script(Reply("fine"))
    assert (await model.request(request(*history, thinking=2048))).text == "fine"
    assert "thinking" not in fake.last_body


async def test_images_cache_marks_and_documents(fake: FakeAnthropic, model: AnthropicModel) -> None:
    marks = [TextBlock(f"part {i}", CacheControl()) for i in range(6)]
    image = ImageBlock({"type": "base64", "media_type": "image/png", "data": PNG})
    url = ImageBlock({"type": "url", "url": "https://example.com/cat.png"})
    pdf = FileBlock(
        {"type": "base64", "media_type": "application/pdf", "data": "JVBERg=="}, "a.pdf"
    )
    fake.script(Reply("seen"))
    await model.request(request(Message.user(*marks, image, url, pdf)))
    content = fake.last_body["messages"][0]["content"]
    assert sum("cache_control" in b for b in content) == 4
    assert content[6]["source"]["type"] == "base64" and content[7]["source"]["type"] == "url"
    assert content[8]["type"] == "document" and content[8]["title"] == "a.pdf"


async def test_unsupported_document_type_is_a_clear_error(model: AnthropicModel) -> None:
    sheet = FileBlock({"type": "base64", "media_type": "application/zip", "data": "UEs="}, "a.zip")
    with pytest.raises(UnsupportedContentError, match="application/zip"):
        await model.request(request(Message.user(sheet)))


async def test_stream_gives_deltas_and_the_same_final_message(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    reply = Reply(
        [Thinking("let me see"), Text("Hello there"), ToolCall("add", {"a": 1}, id="toolu_x")]
    )
    fake.script(reply, reply)
    whole = await model.request(request(Message.user("hi"), thinking=1024))
    events = [e async for e in model.stream(request(Message.user("hi"), thinking=1024))]
    text = "".join(e.text for e in events if e.type == "text_delta")
    assert text == "Hello there"
    assert [e.tool_call.id for e in events if e.type == "tool_use"] == ["toolu_x"]
    assert events[-1].type == "done"
    assert events[-1].response.message == whole.message


async def test_stream_gives_each_tool_calls_input_in_pieces_before_the_whole_call(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    await check_tool_input_streams_in_pieces(
        fake, model, request(Message.user("hi")), ("toolu_x", "toolu_y")
    )


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (401, False), (429, True), (500, True), (529, True)]
)
async def test_errors_are_mapped_with_status_and_retryability(
    fake: FakeAnthropic, model: AnthropicModel, status: int, retryable: bool
) -> None:
    fake.script(ErrorReply(status, "scripted failure"))
    with pytest.raises(ProviderError) as caught:
        await model.request(request(Message.user("hi")))
    assert (caught.value.status, caught.value.retryable) == (status, retryable)
    assert "scripted failure" in caught.value.message


async def test_a_real_refusal_text_reaches_the_caller(model: AnthropicModel) -> None:
    bad = AnthropicModel(MODEL, base_url=model.client.base_url, api_key="wrong", max_retries=0)
    with pytest.raises(ProviderError) as caught:
        await bad.request(request(Message.user("hi")))
    assert caught.value.status == 401 and caught.value.message == "invalid x-api-key"


async def test_rate_limits_are_retried_by_the_sdk(fake: FakeAnthropic) -> None:
    model = AnthropicModel(MODEL, base_url=fake.base_url, api_key="test", max_retries=1)
    fake.script(ErrorReply(429, "slow down", headers={"retry-after": "0"}), Reply("after all"))
    assert (await model.request(request(Message.user("hi")))).text == "after all"
    assert len(fake.requests) == 2


async def test_consecutive_same_role_messages_become_one_turn(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    fake.script(Reply("ok"))
    await model.request(request(Message.user("a"), Message.user("b"), Message.assistant("c")))
    sent = fake.last_body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant"]
    assert [b["text"] for b in sent[0]["content"]] == ["a", "b"]


def test_one_model_serves_several_event_loops(fake: FakeAnthropic) -> None:
    import asyncio

    model = AnthropicModel(MODEL, base_url=fake.base_url, api_key="test", max_retries=0)
    fake.script(Reply("one"), Reply("two"))
    first = asyncio.run(model.request(request(Message.user("hi"))))
    second = asyncio.run(model.request(request(Message.user("hi"))))
    assert (first.text, second.text) == ("one", "two")
