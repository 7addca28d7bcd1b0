"""GeminiModel through the official google-genai SDK against the strict loopback fake."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes import ErrorReply, Reply, Text, Thinking, ToolCall
from fakes.gemini import FakeGemini
from turnkit import ImageBlock, Message, ThinkingBlock, ToolResultBlock, ToolUseBlock
from turnkit.errors import ProviderError, UnsupportedContentError
from turnkit.messages import Origin
from turnkit.providers import ImagePolicy, ModelRequest, ModelSettings, ToolSpec
from turnkit.providers.gemini import GeminiModel

MODEL = "gemini-3-pro-preview"
PNG = "iVBORw0KGgo="


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


@pytest.fixture
def model(fake: FakeGemini) -> GeminiModel:
    return GeminiModel(MODEL, base_url=fake.base_url, api_key="test", max_retries=0)


def request(*messages: Message, **settings: object) -> ModelRequest:
    tools = (ToolSpec("add", "Adds numbers", {"type": "object", "properties": {}}),)
    return ModelRequest(tuple(messages), tools=tools, settings=ModelSettings(**settings))


async def test_text_reply_with_usage_system_and_origin(
    fake: FakeGemini, model: GeminiModel
) -> None:
    fake.script(Reply("Paris.", usage=(12, 3)))
    response = await model.request(request(Message.system("Be brief."), Message.user("Capital?")))
    assert response.text == "Paris." and response.stop_reason == "end_turn"
    assert response.message.origin == Origin("gemini", MODEL)
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    instruction = fake.last_body["systemInstruction"]["parts"][0]["text"]
    assert instruction == "Be brief."


async def test_signed_tool_round_trip_on_gemini_3(fake: FakeGemini, model: GeminiModel) -> None:
    fake.script(Reply([Thinking("plan"), ToolCall("add", {"a": 1})]), Reply("2"))
    first = await model.request(request(Message.user("1+1?"), thinking=1024))
    assert first.stop_reason == "tool_use"
    assert any(isinstance(b, ThinkingBlock) and b.signature for b in first.message.content)
    answer = Message.user(ToolResultBlock(first.tool_calls[0].id, "2"))
    second = await model.request(request(Message.user("1+1?"), first.message, answer))
    assert second.text == "2"
    call_part = next(p for p in fake.last_body["contents"][1]["parts"] if "functionCall" in p)
    assert call_part["thoughtSignature"] != "skip_thought_signature_validator"


async def test_foreign_tool_history_gets_the_placeholder_signature(
    fake: FakeGemini, model: GeminiModel
) -> None:
    history = (
        Message.user("go"),
        Message.assistant("Let me add.", ToolUseBlock("toolu_01", "add", {"a": 1})),
        Message.user(ToolResultBlock("toolu_01", "1")),
        Message.assistant(ToolUseBlock("toolu_02", "add", {}), origin=Origin("anthropic", "c")),
        Message.user(ToolResultBlock("toolu_02", "oops", is_error=True)),
    )
    fake.script(Reply("done"))
    assert (await model.request(request(*history))).text == "done"
    contents = fake.last_body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user", "model", "user"]
    response = contents[4]["parts"][0]["functionResponse"]
    assert response["name"] == "add" and response["response"] == {"error": "oops"}


async def test_consecutive_turns_are_merged_so_roles_alternate(
    fake: FakeGemini, model: GeminiModel
) -> None:
    fake.script(Reply("ok"))
    await model.request(request(Message.user("a"), Message.user("b"), Message.assistant("c")))
    contents = fake.last_body["contents"]
    assert [c["role"] for c in contents] == ["user", "model"]
    assert [p["text"] for p in contents[0]["parts"]] == ["a", "b"]


async def test_inline_images_and_url_images(fake: FakeGemini, model: GeminiModel) -> None:
    inline = ImageBlock({"type": "base64", "media_type": "image/png", "data": PNG})
    fake.script(Reply("a cat"))
    await model.request(request(Message.user("what?", inline)))
    part = fake.last_body["contents"][0]["parts"][1]["inlineData"]
    assert part.get("mimeType", part.get("mime_type")) == "image/png"
    url = ImageBlock({"type": "url", "url": "https://example.com/cat.png"})
    with pytest.raises(UnsupportedContentError, match="cannot take image URLs"):
        await model.request(request(Message.user("what?", url)))


async def test_image_policy_refuses_before_anything_is_sent(
    fake: FakeGemini, model: GeminiModel
) -> None:
    from turnkit.errors import ImagePolicyError

    url = ImageBlock({"type": "url", "url": "http://127.0.0.1:1/cat.png"})
    policy = ImagePolicy(fetch_urls=True)
    with pytest.raises(ImagePolicyError, match="non-public address"):
        await model.request(request(Message.user(url), image_policy=policy))
    assert fake.requests == []


async def test_stream_equals_non_streaming(fake: FakeGemini, model: GeminiModel) -> None:
    reply = Reply(
        [Thinking("let me see"), Text("Hello there, friend"), ToolCall("add", {}, id="c1")]
    )
    fake.script(reply, reply)
    whole = await model.request(request(Message.user("hi"), thinking=1024))
    events = [e async for e in model.stream(request(Message.user("hi"), thinking=1024))]
    assert "".join(e.text for e in events if e.type == "text_delta") == "Hello there, friend"
    assert "".join(e.text for e in events if e.type == "thinking_delta") == "let me see"
    assert events[-1].type == "done"
    assert events[-1].response.message == whole.message


@pytest.mark.parametrize(("status", "retryable"), [(400, False), (429, True), (500, True)])
async def test_errors_are_mapped(
    fake: FakeGemini, model: GeminiModel, status: int, retryable: bool
) -> None:
    fake.script(ErrorReply(status, "scripted failure"))
    with pytest.raises(ProviderError) as caught:
        await model.request(request(Message.user("hi")))
    assert (caught.value.status, caught.value.retryable) == (status, retryable)
    assert "scripted failure" in caught.value.message


def test_cached_tokens_are_counted_apart_from_fresh_input() -> None:
    from google.genai import types

    from turnkit.providers.gemini import _usage

    usage = _usage(
        types.GenerateContentResponseUsageMetadata(
            prompt_token_count=100,
            cached_content_token_count=60,
            candidates_token_count=7,
            thoughts_token_count=3,
        )
    )
    assert (usage.input_tokens, usage.cache_read_tokens, usage.output_tokens) == (40, 60, 10)
