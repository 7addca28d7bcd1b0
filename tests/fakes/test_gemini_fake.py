"""FakeGemini, driven by the official ``google-genai`` SDK."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from google import genai
from google.genai import errors, types

from . import ErrorReply, FakeGemini, Reply, Text, Thinking, ToolCall
from .gemini import SKIP_SIGNATURE, thought_signature

MODEL = "gemini-3-pro-preview"


@pytest.fixture
def fake() -> Iterator[FakeGemini]:
    with FakeGemini() as server:
        yield server


def make_client(fake: FakeGemini, api_key: str = "test") -> genai.Client:
    options = types.HttpOptions(
        base_url=fake.base_url, timeout=5000, retry_options=types.HttpRetryOptions(attempts=1)
    )
    return genai.Client(api_key=api_key, http_options=options)


@pytest.fixture
def client(fake: FakeGemini) -> genai.Client:
    return make_client(fake)


def generate(client: genai.Client, contents: Any, model: str = MODEL, **config: Any) -> Any:
    settings = types.GenerateContentConfig(**config) if config else None
    return client.models.generate_content(model=model, contents=contents, config=settings)


def refusal(client: genai.Client, contents: Any, model: str = MODEL) -> errors.ClientError:
    with pytest.raises(errors.ClientError) as caught:
        generate(client, contents, model)
    assert caught.value.code == 400 and caught.value.status == "INVALID_ARGUMENT"
    return caught.value


def user(text: str = "hi") -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def model_call(name: str = "add", signature: str | None = None, extra: int = 0) -> dict[str, Any]:
    part: dict[str, Any] = {"functionCall": {"name": name, "args": {}}}
    if signature is not None:
        part["thoughtSignature"] = signature
    more = [{"functionCall": {"name": f"{name}{k}", "args": {}}} for k in range(extra)]
    return {"role": "model", "parts": [part, *more]}


def responses(*names: str) -> dict[str, Any]:
    parts = [{"functionResponse": {"name": n, "response": {"result": 2}}} for n in names]
    return {"role": "user", "parts": parts}


def test_text_reply_parses_from_json(fake: FakeGemini, client: genai.Client) -> None:
    fake.script(Reply("Hello", usage=(7, 1)))
    response = generate(client, "hi", system_instruction="be brief")
    assert response.text == "Hello"
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    assert response.usage_metadata.total_token_count == 8
    request = fake.requests[0]
    assert request.path == f"/v1/models/{MODEL}:generateContent"
    assert request.headers["x-goog-api-key"] == "test"
    assert request.body["systemInstruction"]["parts"] == [{"text": "be brief"}]


def test_thought_and_calls_parse_with_signature_on_first_call_only(
    fake: FakeGemini, client: genai.Client
) -> None:
    fake.script(Reply([Thinking("hmm"), ToolCall("add", {"a": 1}), ToolCall("mul", {"b": 2})]))
    parts = generate(client, "hi").candidates[0].content.parts
    assert parts[0].thought is True and parts[0].text == "hmm"
    assert (parts[1].function_call.name, parts[1].function_call.args) == ("add", {"a": 1})
    assert parts[1].thought_signature is not None
    assert parts[2].thought_signature is None
    assert fake.requests[-1].body["contents"][0]["parts"] == [{"text": "hi"}]


def test_stream_over_sse(fake: FakeGemini, client: genai.Client) -> None:
    fake.script(Reply([Text("Hello streaming world"), ToolCall("add", {"a": 1})], usage=(3, 4)))
    pieces = list(client.models.generate_content_stream(model=MODEL, contents="hi"))
    assert (
        "".join(p.text or "" for p in pieces if p.candidates[0].content.parts[0].text)
        == "Hello streaming world"
    )
    assert pieces[-1].function_calls[0].name == "add"
    assert pieces[-1].usage_metadata.candidates_token_count == 4
    assert fake.requests[0].query == {"alt": "sse"}


def test_sdk_history_round_trip_keeps_signatures_valid(
    fake: FakeGemini, client: genai.Client
) -> None:
    fake.script(Reply([ToolCall("add", {"a": 1}), ToolCall("mul", {})]), Reply("3"))
    first = generate(client, "hi")
    history = [
        types.Content(role="user", parts=[types.Part.from_text(text="hi")]),
        first.candidates[0].content,
        types.Content(
            role="user",
            parts=[
                types.Part.from_function_response(name="add", response={"result": 2}),
                types.Part.from_function_response(name="mul", response={"result": 0}),
            ],
        ),
    ]
    assert generate(client, history).text == "3"


def test_refuses_missing_signature_in_current_turn(client: genai.Client) -> None:
    error = refusal(client, [user(), model_call("lookup"), responses("lookup")])
    assert error.message == (
        "Function call is missing a thought_signature in functionCall parts. This is required for "
        "tools to work correctly, and missing thought_signature may lead to degraded model "
        "performance. Additional data, function call `default_api:lookup` , position 2. Please "
        "refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details."
    )


def test_signature_rules_follow_the_docs(fake: FakeGemini, client: genai.Client) -> None:
    fake.script(Reply("ok"), Reply("ok"), Reply("ok"), Reply("ok"))
    earlier_turn = [
        user(),
        model_call(),
        responses("add"),
        {"role": "model", "parts": [{"text": "2"}]},
        user("again"),
    ]
    generate(client, earlier_turn)
    generate(client, [user(), model_call(signature=SKIP_SIGNATURE), responses("add")])
    generate(
        client, [user(), model_call(signature=thought_signature(MODEL, "add")), responses("add")]
    )
    generate(client, [user(), model_call(), responses("add")], model="gemini-2.5-flash")
    forged = refusal(
        client,
        [
            user(),
            model_call(signature=thought_signature("gemini-2.5-pro", "add")),
            responses("add"),
        ],
    )
    assert forged.message == "Corrupted thought signature."


def test_refuses_unbalanced_function_responses(client: genai.Client) -> None:
    signed = thought_signature(MODEL, "add")
    error = refusal(client, [user(), model_call(signature=signed, extra=1), responses("add")])
    assert error.message == (
        "Please ensure that the number of function response parts is equal to the number of "
        "function call parts of the function call turn."
    )
    unanswered = refusal(client, [user(), model_call(signature=signed), user("never mind")])
    assert unanswered.message == error.message
    orphan = refusal(client, [user(), responses("add")])
    assert orphan.message == (
        "Please ensure that function response turn comes immediately after a function call turn."
    )
    first = refusal(client, [model_call(signature=signed), responses("add")])
    assert first.message == (
        "Please ensure that function call turn comes immediately after a user turn or after a "
        "function response turn."
    )


def test_refuses_roles_other_than_user_and_model(client: genai.Client) -> None:
    assert refusal(client, [{"role": "system", "parts": [{"text": "x"}]}, user()]).message == (
        "Please use a valid role: user, model."
    )
    assert refusal(client, [{"role": "assistant", "parts": [{"text": "x"}]}]).message == (
        "Please use a valid role: user, model."
    )


def test_refuses_empty_names_and_invalid_declarations(client: genai.Client) -> None:
    signed = thought_signature(MODEL, "add")
    nameless = {"role": "user", "parts": [{"functionResponse": {"name": "", "response": {}}}]}
    error = refusal(client, [user(), model_call(signature=signed), nameless])
    assert error.message == (
        "* GenerateContentRequest.contents[2].parts[0].function_response.name: Name cannot be "
        "empty.\n"
    )
    declaration = types.FunctionDeclaration(name="mcp/search", description="d")
    with pytest.raises(errors.ClientError) as caught:
        generate(client, "hi", tools=[types.Tool(function_declarations=[declaration])])
    assert caught.value.message.startswith(
        "The GenerateContentRequest proto is invalid:\n  * tools[0].function_declarations[0].name: "
        "[FIELD_INVALID] Invalid function name."
    )


def test_auth_errors(fake: FakeGemini) -> None:
    with pytest.raises(errors.ClientError) as caught:
        generate(make_client(fake, api_key="wrong"), "hi")
    assert caught.value.message == "API key not valid. Please pass a valid API key."
    assert caught.value.details["error"]["details"][0]["reason"] == "API_KEY_INVALID"
    url = f"{fake.base_url}/v1beta/models/{MODEL}:generateContent"
    request = urllib.request.Request(url, json.dumps({"contents": [user()]}).encode())
    with pytest.raises(urllib.error.HTTPError) as raw:
        urllib.request.urlopen(request, timeout=5)
    assert raw.value.code == 403
    assert json.loads(raw.value.read())["error"]["status"] == "PERMISSION_DENIED"


def test_key_query_parameter_and_json_array_stream(fake: FakeGemini) -> None:
    fake.script(Reply("one two three"))
    url = f"{fake.base_url}/v1beta/models/{MODEL}:streamGenerateContent?key=test"
    body = json.dumps({"contents": [user()]}).encode()
    with urllib.request.urlopen(urllib.request.Request(url, body), timeout=5) as response:
        pieces = json.loads(response.read())
    assert (
        "".join(p["candidates"][0]["content"]["parts"][0]["text"] for p in pieces)
        == "one two three"
    )
    assert pieces[-1]["candidates"][0]["finishReason"] == "STOP"


def test_scripted_errors_reach_the_sdk(fake: FakeGemini, client: genai.Client) -> None:
    fake.script(
        ErrorReply(429, "Resource has been exhausted (e.g. check quota).", {"retry-after": "3"})
    )
    fake.script(ErrorReply(500, ""))
    with pytest.raises(errors.ClientError) as limited:
        generate(client, "hi")
    assert (limited.value.code, limited.value.status) == (429, "RESOURCE_EXHAUSTED")
    assert limited.value.response.headers["retry-after"] == "3"
    with pytest.raises(errors.ServerError) as failed:
        generate(client, "hi")
    assert failed.value.status == "INTERNAL"
