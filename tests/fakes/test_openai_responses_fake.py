"""FakeOpenAIResponses, driven by the official ``openai`` SDK."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from . import ErrorReply, FakeOpenAIResponses, Reply, Text, Thinking, ToolCall

MODEL = "gpt-5"
ENCRYPTED = ["reasoning.encrypted_content"]


@pytest.fixture
def fake() -> Iterator[FakeOpenAIResponses]:
    with FakeOpenAIResponses() as server:
        yield server


@pytest.fixture
def client(fake: FakeOpenAIResponses) -> openai.OpenAI:
    return openai.OpenAI(base_url=fake.base_url + "/v1", api_key="test", max_retries=0, timeout=5)


def create(client: openai.OpenAI, input: Any, **extra: Any) -> Any:
    return client.responses.create(model=MODEL, input=input, **extra)


def refusal(client: openai.OpenAI, input: Any, **extra: Any) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as caught:
        create(client, input, **extra)
    return caught.value


def text(error: openai.APIStatusError) -> str:
    assert isinstance(error.body, dict)
    return str(error.body["message"])


def user(content: Any = "hi") -> dict[str, Any]:
    return {"role": "user", "content": content}


def call(call_id: str = "call_1", **extra: Any) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "add", "arguments": "{}", **extra}


def output(call_id: str = "call_1") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "2"}


def dumped(items: Any) -> list[dict[str, Any]]:
    return [item.model_dump(exclude_none=True) for item in items]


def test_text_reply_parses_from_json(fake: FakeOpenAIResponses, client: openai.OpenAI) -> None:
    fake.script(Reply([Text("Hello "), Text("world")], usage=(8, 2)))
    response = create(client, "hi")
    assert response.output_text == "Hello world"
    assert response.status == "completed"
    assert response.usage.total_tokens == 10
    assert re.fullmatch(r"resp_[0-9a-f]{48}", response.id)
    assert fake.requests[0].path == "/v1/responses"


def test_reasoning_and_call_parse_with_encrypted_content(
    fake: FakeOpenAIResponses, client: openai.OpenAI
) -> None:
    fake.script(Reply([Thinking("sum it"), ToolCall("add", {"a": 1})]))
    response = create(client, "hi", store=False, include=ENCRYPTED)
    reasoning, function_call = response.output
    assert re.fullmatch(r"rs_[0-9a-f]{50}", reasoning.id)
    assert reasoning.summary[0].text == "sum it"
    assert reasoning.encrypted_content.startswith("gAAAAAB")
    assert re.fullmatch(r"fc_[0-9a-f]{50}", function_call.id)
    assert reasoning.id[3:27] == function_call.id[3:27]
    assert function_call.call_id.startswith("call_") and len(function_call.call_id) == 29
    assert function_call.arguments == '{"a": 1}'


def test_encrypted_content_only_when_included(
    fake: FakeOpenAIResponses, client: openai.OpenAI
) -> None:
    fake.script(Reply([Thinking("x"), Text("y")]))
    assert create(client, "hi").output[0].encrypted_content is None


def test_stream_events_and_helper(fake: FakeOpenAIResponses, client: openai.OpenAI) -> None:
    reply = Reply(
        [Thinking("thinking hard"), Text("The answer"), ToolCall("add", {"a": 40, "b": 2})]
    )
    fake.script(reply, reply)
    events = list(create(client, "hi", stream=True))
    kinds = list(dict.fromkeys(e.type for e in events))
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    with client.responses.stream(model=MODEL, input="hi") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "The answer" == final.output_text
    assert final.output[2].arguments == '{"a": 40, "b": 2}'


def test_max_tokens_stop_is_incomplete(fake: FakeOpenAIResponses, client: openai.OpenAI) -> None:
    fake.script(Reply("cut", stop_reason="max_tokens"))
    response = create(client, "hi")
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"


def test_stateless_round_trip_with_encrypted_reasoning_is_accepted(
    fake: FakeOpenAIResponses, client: openai.OpenAI
) -> None:
    fake.script(Reply([Thinking("plan"), ToolCall("add", {})]), Reply("2"))
    first = create(client, [user()], store=False, include=ENCRYPTED)
    items = [user(), *dumped(first.output), output(first.output[1].call_id)]
    assert create(client, items, store=False, include=ENCRYPTED).output_text == "2"


def test_stored_round_trip_and_previous_response_id(
    fake: FakeOpenAIResponses, client: openai.OpenAI
) -> None:
    fake.script(Reply([Thinking("plan"), ToolCall("add", {})]), Reply("2"), Reply("3"))
    first = create(client, [user()])
    call_id = first.output[1].call_id
    assert create(client, [user(), *dumped(first.output), output(call_id)]).output_text == "2"
    assert create(client, [output(call_id)], previous_response_id=first.id).output_text == "3"
    error = refusal(client, [user("skip the output")], previous_response_id=first.id)
    assert text(error) == f"No tool output found for function call {call_id}."


def test_refuses_call_without_output(client: openai.OpenAI) -> None:
    error = refusal(client, [user(), call("call_abc"), user("next")])
    assert text(error) == "No tool output found for function call call_abc."
    assert (error.body["param"], error.body["code"]) == ("input", None)  # type: ignore[index]


def test_refuses_output_without_call(client: openai.OpenAI) -> None:
    error = refusal(client, [user(), output("call_zzz")])
    assert text(error) == "No tool call found for function call output with call_id call_zzz."


def test_refuses_reasoning_without_following_item(
    fake: FakeOpenAIResponses, client: openai.OpenAI
) -> None:
    fake.script(Reply([Thinking("plan"), Text("answer")]))
    first = create(client, [user()], store=False, include=ENCRYPTED)
    reasoning = first.output[0].model_dump(exclude_none=True)
    error = refusal(client, [user(), reasoning, user("more")], store=False)
    assert text(error) == (
        f"Item '{reasoning['id']}' of type 'reasoning' was provided without its required "
        "following item."
    )


def test_refuses_call_without_its_reasoning(
    fake: FakeOpenAIResponses, client: openai.OpenAI
) -> None:
    fake.script(Reply([Thinking("plan"), ToolCall("add", {})]), Reply("fine"))
    first = create(client, [user()], store=False, include=ENCRYPTED)
    reasoning, function_call = dumped(first.output)
    error = refusal(client, [user(), function_call, output(function_call["call_id"])], store=False)
    assert text(error) == (
        f"Item '{function_call['id']}' of type 'function_call' was provided without its required "
        f"'reasoning' item: '{reasoning['id']}'."
    )
    without_id = {k: v for k, v in function_call.items() if k != "id"}
    assert (
        create(
            client, [user(), without_id, output(function_call["call_id"])], store=False
        ).output_text
        == "fine"
    )


def test_refuses_reasoning_by_id_when_not_stored(
    fake: FakeOpenAIResponses, client: openai.OpenAI
) -> None:
    fake.script(Reply([Thinking("plan"), ToolCall("add", {})]))
    first = create(client, [user()], store=False)
    items = [user(), *dumped(first.output), output(first.output[1].call_id)]
    error = refusal(client, items, store=False)
    assert text(error) == (
        f"Item with id '{first.output[0].id}' not found. Items are not persisted when `store` is "
        "set to false. Try again with `store` set to true, or remove this item from your input."
    )


def test_refuses_duplicate_items(fake: FakeOpenAIResponses, client: openai.OpenAI) -> None:
    fake.script(Reply([Thinking("plan"), ToolCall("add", {})]))
    first = create(client, [user()], store=False, include=ENCRYPTED)
    reasoning, function_call = dumped(first.output)
    items = [
        user(),
        reasoning,
        function_call,
        reasoning,
        function_call,
        output(function_call["call_id"]),
    ]
    error = refusal(client, items, store=False)
    assert text(error) == (
        f"Duplicate item found with id {reasoning['id']}. Remove duplicate items from your input "
        "and try again."
    )


def test_refuses_made_up_encrypted_content(client: openai.OpenAI) -> None:
    reasoning = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [],
        "encrypted_content": "gAAAAABmade-up",
    }
    error = refusal(client, [user(), reasoning, call(), output()], store=False)
    assert text(error) == (
        "The encrypted content for item rs_1 could not be verified. Reason: Encrypted content "
        "could not be decrypted or parsed."
    )
    assert error.code == "invalid_encrypted_content"


def test_refuses_long_call_ids_and_wrong_part_types(client: openai.OpenAI) -> None:
    long_id = "c" * 65
    error = refusal(client, [user(), call(long_id), output(long_id)])
    assert text(error) == (
        "Invalid 'input[1].call_id': string too long. Expected a string with maximum length 64, "
        "but got a string with length 65 instead."
    )
    assistant = {"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}
    error = refusal(client, [user(), assistant, user()])
    assert (
        text(error)
        == "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'."
    )
    image = {"type": "input_image", "image_url": "data:image/png;base64,"}
    assert text(refusal(client, [user([image])])).endswith("but got empty base64-encoded bytes.")


def test_auth_and_scripted_errors(fake: FakeOpenAIResponses, client: openai.OpenAI) -> None:
    wrong = openai.OpenAI(base_url=fake.base_url + "/v1", api_key="nope", max_retries=0, timeout=5)
    with pytest.raises(openai.AuthenticationError):
        create(wrong, "hi")
    fake.script(ErrorReply(429, "too many"), ErrorReply(503, ""))
    with pytest.raises(openai.RateLimitError):
        create(client, "hi")
    with pytest.raises(openai.InternalServerError) as caught:
        create(client, "hi")
    assert caught.value.status_code == 503


def test_refuses_reasoning_followed_by_its_item_without_the_item_id(
    fake: FakeOpenAIResponses, client: openai.OpenAI
) -> None:
    fake.script(Reply([Thinking("plan"), Text("4")]), Reply("fine"))
    first = create(client, [user()], store=False, include=ENCRYPTED)
    reasoning, message = dumped(first.output)
    without_id = {k: v for k, v in message.items() if k != "id"}
    error = refusal(client, [user(), reasoning, without_id, user("more")], store=False)
    assert text(error) == (
        f"Item '{reasoning['id']}' of type 'reasoning' was provided without its required "
        "following item."
    )
    accepted = create(client, [user(), reasoning, message, user("more")], store=False)
    assert accepted.output_text == "fine"
