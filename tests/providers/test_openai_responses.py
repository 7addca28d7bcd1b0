"""OpenAIResponsesModel through the official SDK against the strict loopback fake."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fakes import ErrorReply, FakeOpenAIResponses, Reply, Text, Thinking, ToolCall
from providers.streamed_tools import check_tool_input_streams_in_pieces
from turnkit import ImageBlock, Message, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from turnkit.errors import ProviderError, UnsupportedContentError
from turnkit.messages import FileBlock, Origin
from turnkit.providers import ModelRequest, ModelSettings, ToolSpec, resolve_model
from turnkit.providers.openai_responses import OpenAIResponsesModel

MODEL = "gpt-5"
PNG = "iVBORw0KGgo="


@pytest.fixture
def fake() -> Iterator[FakeOpenAIResponses]:
    with FakeOpenAIResponses() as server:
        yield server


def make_model(fake: FakeOpenAIResponses, **options: Any) -> OpenAIResponsesModel:
    base_url = fake.base_url + "/v1"
    return OpenAIResponsesModel(MODEL, base_url=base_url, api_key="test", max_retries=0, **options)


@pytest.fixture
def model(fake: FakeOpenAIResponses) -> OpenAIResponsesModel:
    return make_model(fake)


def request(*messages: Message, **settings: Any) -> ModelRequest:
    tools = (ToolSpec("add", "Adds numbers", {"type": "object", "properties": {}}),)
    return ModelRequest(tuple(messages), tools=tools, settings=ModelSettings(**settings))


def kinds(body: dict[str, Any]) -> list[str]:
    return [item.get("type") or "message" for item in body["input"]]


def signature(block: Any) -> dict[str, str]:
    assert isinstance(block, ThinkingBlock) and block.signature
    return json.loads(block.signature)


async def test_text_reply_with_usage_origin_and_instructions(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    fake.script(Reply("Paris.", usage=(12, 3)))
    req = ModelRequest(
        (Message.system("Be brief."), Message.user("Capital?")),
        system="You are a geographer.",
        settings=ModelSettings(max_output_tokens=50, temperature=0.2),
    )
    response = await model.request(req)
    assert response.text == "Paris."
    assert response.message.origin == Origin("openai-responses", MODEL)
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 3)
    assert (response.stop_reason, response.raw_stop_reason) == ("end_turn", "completed")
    body = fake.last_body
    assert body["instructions"] == "You are a geographer.\n\nBe brief."
    assert body["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Capital?"}]}
    ]
    assert (body["store"], body["max_output_tokens"], body["temperature"]) == (False, 50, 0.2)
    assert "include" not in body and "reasoning" not in body and "tools" not in body


async def test_tool_call_round_trip(fake: FakeOpenAIResponses, model: OpenAIResponsesModel) -> None:
    fake.script(Reply([ToolCall("add", {"a": 1, "b": 2})]), Reply("3"))
    first = await model.request(request(Message.user("1+2?")))
    assert first.stop_reason == "tool_use"
    call = first.tool_calls[0]
    assert (call.name, dict(call.input)) == ("add", {"a": 1, "b": 2})
    assert call.id.startswith("call_")
    assert fake.last_body["tools"] == [
        {
            "type": "function",
            "name": "add",
            "description": "Adds numbers",
            "parameters": {"type": "object", "properties": {}},
            "strict": False,
        }
    ]
    answer = Message.user(ToolResultBlock(call.id, "3"))
    second = await model.request(request(Message.user("1+2?"), first.message, answer))
    assert second.text == "3"
    sent_call, sent_output = fake.last_body["input"][1:]
    assert sent_call == {
        "type": "function_call",
        "call_id": call.id,
        "name": "add",
        "arguments": '{"a": 1, "b": 2}',
    }
    assert sent_output == {"type": "function_call_output", "call_id": call.id, "output": "3"}


async def test_stateless_reasoning_and_call_replay_is_accepted(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    fake.script(
        Reply([Thinking("sum it"), ToolCall("add", {"a": 1})]),
        Reply([Thinking("say it"), Text("It is 2.")]),
        Reply("Bye."),
    )
    history = [Message.user("1+1?")]
    first = await model.request(request(*history, thinking="low"))
    assert fake.last_body["include"] == ["reasoning.encrypted_content"]
    assert fake.last_body["reasoning"] == {"effort": "low", "summary": "auto"}
    thinking = first.message.content[0]
    state = signature(thinking)
    assert thinking.thinking == "sum it"
    assert state["id"].startswith("rs_") and state["encrypted_content"].startswith("gAAAAAB")
    assert (state["next_type"], state["next_id"][:3]) == ("function_call", "fc_")

    history += [first.message, Message.user(ToolResultBlock(first.tool_calls[0].id, "2"))]
    second = await model.request(request(*history, thinking="low"))
    assert second.text == "It is 2."
    sent = fake.last_body["input"]
    assert kinds(fake.last_body) == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert (
        sent[1]["id"] == state["id"] and sent[1]["encrypted_content"] == state["encrypted_content"]
    )
    assert sent[1]["summary"] == [{"type": "summary_text", "text": "sum it"}]
    assert sent[2]["id"] == state["next_id"]

    history += [second.message, Message.user("thanks")]
    assert (await model.request(request(*history, thinking="low"))).text == "Bye."
    message_id = signature(second.message.content[0])["next_id"]
    assert fake.last_body["input"][5] == {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "It is 2.", "annotations": []}],
    }


async def test_reasoning_without_encrypted_content_is_not_replayed_when_stateless(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    fake.script(Reply([Thinking("plan"), ToolCall("add", {})]), Reply("done"))
    first = await model.request(request(Message.user("go")))  # thinking off: no include
    assert first.message.content[0] == ThinkingBlock("plan")
    result = Message.user(ToolResultBlock(first.tool_calls[0].id, "1"))
    assert (await model.request(request(Message.user("go"), first.message, result))).text == "done"
    assert kinds(fake.last_body) == ["message", "function_call", "function_call_output"]
    assert "id" not in fake.last_body["input"][1]


async def test_stored_reasoning_replays_by_id_and_a_stateless_model_drops_it(
    fake: FakeOpenAIResponses,
) -> None:
    stored = make_model(fake, store=True)
    fake.script(Reply([Thinking("plan"), ToolCall("add", {})]), Reply("ok"), Reply("also ok"))
    first = await stored.request(request(Message.user("go")))
    assert "encrypted_content" not in signature(first.message.content[0])
    history = (
        Message.user("go"),
        first.message,
        Message.user(ToolResultBlock(first.tool_calls[0].id, "1")),
    )
    assert (await stored.request(request(*history))).text == "ok"
    assert kinds(fake.last_body)[1:3] == ["reasoning", "function_call"]
    assert fake.last_body["store"] is True
    assert (await make_model(fake).request(request(*history))).text == "also ok"
    assert kinds(fake.last_body) == ["message", "function_call", "function_call_output"]


async def test_foreign_reasoning_is_dropped_or_sent_as_text(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    foreign = Message.assistant(
        ThinkingBlock("hmm", '{"id":"rs_1","encrypted_content":"gAAAAABx"}'),
        "Hi",
        origin=Origin("openai", MODEL),
    )
    fake.script(Reply("a"), Reply("b"))
    await model.request(request(Message.user("q"), foreign, Message.user("more")))
    assert fake.last_body["input"][1] == {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Hi", "annotations": []}],
    }
    await model.request(
        request(Message.user("q"), foreign, Message.user("more"), thinking_replay="text")
    )
    texts = [part["text"] for part in fake.last_body["input"][1]["content"]]
    assert texts == ["<thinking>\nhmm\n</thinking>", "Hi"]
    assert kinds(fake.last_body) == ["message", "message", "message"]


async def test_history_from_other_providers_maps_tool_ids_consistently(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    odd = "call|item:" + "x" * 80
    history = (
        Message.user("go"),
        Message.assistant(
            ThinkingBlock("claude thoughts", "EsIGsig"),
            ToolUseBlock("toolu_01A", "add", {}),
            origin=Origin("anthropic", "claude-sonnet-4-6"),
        ),
        Message.user(ToolResultBlock("toolu_01A", "0")),
        Message.assistant(
            ToolUseBlock(odd, "add", {}),
            ToolUseBlock("call|other", "add", {}),
            ToolUseBlock("fc.2", "add", {}),
            origin=Origin("openai", "gpt-4o"),
        ),
        Message.user(
            ToolResultBlock(odd, "1"),
            ToolResultBlock("call|other", "2"),
            ToolResultBlock("fc.2", "3"),
        ),
    )
    fake.script(Reply("done"))
    assert (await model.request(request(*history))).text == "done"
    sent = fake.last_body["input"]
    calls = [i["call_id"] for i in sent if i["type"] == "function_call"]
    outputs = [i["call_id"] for i in sent if i["type"] == "function_call_output"]
    assert calls == outputs and len(set(calls)) == 4
    assert calls[0] == "toolu_01A"
    assert all(len(c) <= 64 and c.replace("_", "").replace("-", "").isalnum() for c in calls)
    assert "reasoning" not in kinds(fake.last_body)
    assert history[3].content[0].id == odd


async def test_images_and_pdf_files_become_input_parts(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    image = ImageBlock({"type": "base64", "media_type": "image/png", "data": PNG})
    url = ImageBlock({"type": "url", "url": "https://example.com/cat.png"})
    pdf = FileBlock(
        {"type": "base64", "media_type": "application/pdf", "data": "JVBERg=="}, "a.pdf"
    )
    fake.script(Reply("seen"))
    await model.request(request(Message.user("look", image, url, pdf)))
    assert fake.last_body["input"][0]["content"] == [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
        {"type": "input_image", "image_url": "https://example.com/cat.png", "detail": "auto"},
        {
            "type": "input_file",
            "filename": "a.pdf",
            "file_data": "data:application/pdf;base64,JVBERg==",
        },
    ]


async def test_unsupported_file_type_is_a_clear_error(model: OpenAIResponsesModel) -> None:
    sheet = FileBlock({"type": "base64", "media_type": "application/zip", "data": "UEs="}, "a.zip")
    with pytest.raises(UnsupportedContentError, match="application/zip"):
        await model.request(request(Message.user(sheet)))


async def test_tool_results_with_images_are_sent_as_parts(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    image = ImageBlock({"type": "base64", "media_type": "image/png", "data": PNG})
    history = (
        Message.user("screenshot please"),
        Message.assistant(ToolUseBlock("call_1", "shot", {})),
        Message.user(
            ToolResultBlock("call_1", (TextBlock("here"), image)),
            "what do you see?",
        ),
    )
    fake.script(Reply("a cat"))
    assert (await model.request(request(*history))).text == "a cat"
    output, follow_up = fake.last_body["input"][2:]
    assert output["output"] == [
        {"type": "input_text", "text": "here"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
    ]
    assert follow_up["content"] == [{"type": "input_text", "text": "what do you see?"}]


async def test_the_same_turn_twice_sends_no_duplicate_item_ids(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    fake.script(Reply([Thinking("hm"), Text("A")]), Reply("B"))
    first = await model.request(request(Message.user("q"), thinking=True))
    history = (Message.user("q"), first.message, Message.user("again"), first.message)
    assert (await model.request(request(*history, Message.user("?"), thinking=True))).text == "B"
    ids = [i["id"] for i in fake.last_body["input"] if "id" in i]
    assert len(ids) == len(set(ids)) == 2


async def test_stream_gives_deltas_and_the_same_final_message(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    reply = Reply(
        [Thinking("let me see"), Text("Hello there"), ToolCall("add", {"a": 1}, id="call_x")]
    )
    fake.script(reply, reply)
    whole = await model.request(request(Message.user("hi")))
    events = [e async for e in model.stream(request(Message.user("hi")))]
    assert "".join(e.text for e in events if e.type == "text_delta") == "Hello there"
    assert "".join(e.text for e in events if e.type == "thinking_delta") == "let me see"
    assert [e.tool_call for e in events if e.type == "tool_use"] == list(whole.tool_calls)
    assert fake.last_body["stream"] is True
    assert events[-1].type == "done"
    done = events[-1].response
    assert done.message == whole.message
    assert (done.usage, done.stop_reason) == (whole.usage, whole.stop_reason)


async def test_stream_gives_each_tool_calls_input_in_pieces_before_the_whole_call(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    await check_tool_input_streams_in_pieces(
        fake, model, request(Message.user("hi")), ("call_x", "call_y")
    )


async def test_streamed_reasoning_replays_like_a_plain_reply(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    fake.script(Reply([Thinking("plan"), ToolCall("add", {})]), Reply("2"))
    events = [e async for e in model.stream(request(Message.user("go"), thinking="high"))]
    first = events[-1].response
    assert "encrypted_content" in signature(first.message.content[0])
    result = Message.user(ToolResultBlock(first.tool_calls[0].id, "2"))
    again = await model.request(request(Message.user("go"), first.message, result, thinking="high"))
    assert again.text == "2"


async def test_max_output_tokens_stop(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    fake.script(Reply("cut", stop_reason="max_tokens"), Reply("cut", stop_reason="max_tokens"))
    response = await model.request(request(Message.user("hi")))
    assert (response.stop_reason, response.raw_stop_reason) == ("max_tokens", "max_output_tokens")
    events = [e async for e in model.stream(request(Message.user("hi")))]
    assert events[-1].response.stop_reason == "max_tokens"


@pytest.mark.parametrize(
    ("status", "retryable"), [(400, False), (401, False), (429, True), (500, True), (503, True)]
)
async def test_errors_are_mapped_with_status_and_retryability(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel, status: int, retryable: bool
) -> None:
    fake.script(ErrorReply(status, "scripted failure", headers={"retry-after": "3"}))
    with pytest.raises(ProviderError) as caught:
        await model.request(request(Message.user("hi")))
    assert (caught.value.status, caught.value.retryable) == (status, retryable)
    assert caught.value.message == "scripted failure"
    assert caught.value.retry_after == 3.0


async def test_stream_errors_are_mapped_too(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    fake.script(ErrorReply(429, "slow down"))
    with pytest.raises(ProviderError) as caught:
        [e async for e in model.stream(request(Message.user("hi")))]
    assert (caught.value.status, caught.value.retryable, caught.value.message) == (
        429,
        True,
        "slow down",
    )


async def test_real_refusal_texts_reach_the_caller(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    bad = OpenAIResponsesModel(
        MODEL, base_url=fake.base_url + "/v1", api_key="wrong-key-123", max_retries=0
    )
    with pytest.raises(ProviderError) as caught:
        await bad.request(request(Message.user("hi")))
    assert caught.value.status == 401 and not caught.value.retryable
    assert caught.value.message.startswith("Incorrect API key provided: ")

    forged_state = {"id": "rs_1", "encrypted_content": "gAAAAABforged", "next_type": "message"}
    forged = Message.assistant(
        ThinkingBlock("x", json.dumps(forged_state)),
        "Hi",
        origin=Origin("openai-responses", MODEL),
    )
    with pytest.raises(ProviderError) as caught:
        await model.request(request(Message.user("q"), forged, Message.user("more")))
    assert (caught.value.status, caught.value.retryable) == (400, False)
    assert caught.value.message == (
        "The encrypted content for item rs_1 could not be verified. "
        "Reason: Encrypted content could not be decrypted or parsed."
    )


async def test_connection_failures_are_retryable() -> None:
    closed = OpenAIResponsesModel(
        MODEL, base_url="http://127.0.0.1:9/v1", api_key="test", max_retries=0
    )
    with pytest.raises(ProviderError) as caught:
        await closed.request(request(Message.user("hi")))
    assert caught.value.retryable and caught.value.status is None


async def test_model_string_resolves_with_base_url(
    fake: FakeOpenAIResponses, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    resolved = resolve_model(f"openai-responses:{MODEL}@{fake.base_url}/v1")
    assert isinstance(resolved, OpenAIResponsesModel) and resolved.id == f"openai-responses:{MODEL}"
    fake.script(Reply("hi"))
    assert (await resolved.request(request(Message.user("hi")))).text == "hi"


async def test_a_turn_cut_off_after_its_reasoning_is_replayed_without_it(
    fake: FakeOpenAIResponses, model: OpenAIResponsesModel
) -> None:
    fake.script(Reply([Thinking("long plan")], stop_reason="max_tokens"), Reply("short"))
    first = await model.request(request(Message.user("go"), thinking="low"))
    assert first.stop_reason == "max_tokens"
    assert "next_type" not in signature(first.message.content[0])
    history = (Message.user("go"), first.message, Message.user("be brief"))
    assert (await model.request(request(*history, thinking="low"))).text == "short"
    assert kinds(fake.last_body) == ["message", "message"]


_ids = st.integers(0, 2)
_signatures = st.builds(
    lambda n, kind, next_n: json.dumps(
        {
            "id": f"rs_{n}",
            "encrypted_content": "gAAAAABx",
            "next_type": kind,
            "next_id": f"{'msg' if kind == 'message' else 'fc'}_{next_n}",
        }
    ),
    _ids,
    st.sampled_from(["message", "function_call", "reasoning"]),
    _ids,
)
_assistant_blocks = st.one_of(
    st.builds(ThinkingBlock, st.text(max_size=5), _signatures),
    st.builds(TextBlock, st.text(max_size=5)),
    st.just("call"),  # made a ToolUseBlock with an id unique in its turn
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_assistant_blocks, min_size=1, max_size=6), min_size=1, max_size=4))
def test_replayed_items_never_break_the_pairing_rules(turns: list[list[Any]]) -> None:
    origin = Origin("openai-responses", MODEL)
    history: list[Message] = [Message.user("go")]
    for blocks in turns:
        content = [
            ToolUseBlock(f"call_{i}", "add", {}) if block == "call" else block
            for i, block in enumerate(blocks)
        ]
        history += [Message.assistant(*content, origin=origin), Message.user("next")]
    model = OpenAIResponsesModel(MODEL, api_key="test")
    items = asyncio.run(model.build_params(request(*history, thinking=True)))["input"]
    ids = [item["id"] for item in items if "id" in item]
    assert len(ids) == len(set(ids))
    for index, item in enumerate(items):
        before = items[index - 1] if index else {}
        after = items[index + 1] if index + 1 < len(items) else {}
        if item["type"] == "reasoning":
            assert after.get("type") in ("message", "function_call")
            assert after.get("role", "assistant") == "assistant"
        elif "id" in item:
            assert before.get("type") == "reasoning"
