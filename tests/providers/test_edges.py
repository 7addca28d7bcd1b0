"""Each edge case gets the same treatment from every provider (turnkit.providers.edges).

Every remote provider runs its official SDK against its strict loopback fake;
what is refused is refused before any request reaches the fake.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from fakes import ErrorReply, Reply
from fakes.models import REMOTES, serve
from turnkit import (
    Agent,
    AgentConfig,
    FileBlock,
    ImageBlock,
    InvalidMessageError,
    Message,
    ProviderError,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    UnsupportedContentError,
)
from turnkit.providers import Model, ModelRequest, ToolSpec, Usage
from turnkit.providers.edges import (
    HISTORY_START,
    RAW_ARGUMENTS,
    provider_error,
    tool_call,
    usage,
)
from turnkit.tools import Tool, execute_tool_call

PNG = "iVBORw0KGgo="
IMAGE = ImageBlock({"type": "base64", "media_type": "image/png", "data": PNG})


@pytest.fixture(scope="module", params=list(REMOTES))
def remote(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any, Model]]:
    with serve(request.param) as (fake, model):
        yield request.param, fake, model


async def both(model: Model, request: ModelRequest) -> list[Any]:
    """The outcome of request() and of stream(), each a response or the error raised."""
    outcomes: list[Any] = []
    try:
        outcomes.append(await model.request(request))
    except Exception as err:
        outcomes.append(err)
    try:
        outcomes.append([event async for event in model.stream(request)][-1].response)
    except Exception as err:
        outcomes.append(err)
    return outcomes


def file(media_type: str, name: str) -> FileBlock:
    return FileBlock({"type": "base64", "media_type": media_type, "data": PNG}, name)


async def test_an_assistant_image_is_refused_with_its_path_or_sent(
    remote: tuple[str, Any, Model],
) -> None:
    name, fake, model = remote
    history = (
        Message.user("Draw a cat"),
        Message("assistant", (TextBlock("Here it is"), IMAGE)),
        Message.user("Nice"),
    )
    before = len(fake.requests)
    if name == "gemini":  # model turns may hold images (image models write them)
        fake.script("ok", "ok")
        outcomes = await both(model, ModelRequest(history))
        assert [o.text for o in outcomes] == ["ok", "ok"]
        model_turn = fake.last_body["contents"][1]
        assert model_turn["role"] == "model" and "inlineData" in model_turn["parts"][1]
        return
    for error in await both(model, ModelRequest(history)):
        assert isinstance(error, UnsupportedContentError)
        assert "messages[1].content[1]:" in str(error) and "only in user messages" in str(error)
    assert len(fake.requests) == before


@pytest.mark.parametrize(
    ("block", "takers"),
    [
        (file("application/pdf", "a.pdf"), {"anthropic", "openai", "openai-responses", "gemini"}),
        (file("text/plain", "notes.txt"), {"anthropic", "gemini"}),
        (file("application/zip", "a.zip"), {"gemini"}),
        (
            FileBlock({"type": "url", "url": "https://example.com/doc.pdf"}, "doc.pdf"),
            {"anthropic", "openai-responses", "gemini"},
        ),
    ],
    ids=["pdf", "text", "zip", "pdf-url"],
)
async def test_file_types_are_taken_or_refused_by_one_table(
    remote: tuple[str, Any, Model], block: FileBlock, takers: set[str]
) -> None:
    name, fake, model = remote
    request = ModelRequest((Message.user("Read this", block),))
    before = len(fake.requests)
    if name in takers:
        fake.script("read")
        assert (await model.request(request)).text == "read"
        assert len(fake.requests) == before + 1
        return
    with pytest.raises(UnsupportedContentError, match=r"messages\[0\]\.content\[1\]: ") as caught:
        await model.request(request)
    assert block.filename in str(caught.value) or "by URL" in str(caught.value)
    assert len(fake.requests) == before


async def test_empty_and_blank_text_is_never_sent(remote: tuple[str, Any, Model]) -> None:
    _, fake, model = remote
    call = ToolUseBlock("call_1", "add", {"a": 1})
    history = (
        Message("user", (TextBlock(""), TextBlock("Add one"), TextBlock(" \n"))),
        Message("assistant", (TextBlock("  "), call)),
        Message.user(ToolResultBlock("call_1", (TextBlock(""), TextBlock("2")))),
        Message.user("\t"),
    )
    fake.script("two", "two")
    tools = (ToolSpec("add", "Adds", {"type": "object"}),)
    outcomes = await both(model, ModelRequest(history, tools=tools))
    assert [o.text for o in outcomes] == ["two", "two"]
    body = json.dumps(fake.last_body)
    for blank in ('"text": ""', '"text": " \\n"', '"text": "  "', '"text": "\\t"'):
        assert blank not in body
    assert "Add one" in body


async def test_blank_only_or_empty_history_is_refused_before_sending(
    remote: tuple[str, Any, Model],
) -> None:
    _, fake, model = remote
    before = len(fake.requests)
    empty = Message("user", ())
    for messages in (
        (),
        (Message.system("Be brief."),),
        (Message.user("   "),),
        (empty,),  # {"role": "user", "content": []}
        (empty, Message("assistant", ()), Message.user(" ")),
    ):
        for outcome in await both(model, ModelRequest(messages)):
            assert isinstance(outcome, InvalidMessageError)
            assert str(outcome).startswith("messages: nothing to send: the history has no")
    assert len(fake.requests) == before


async def test_a_message_with_no_blocks_is_not_sent(remote: tuple[str, Any, Model]) -> None:
    _, fake, model = remote
    history = (Message.user("Hi"), Message("assistant", ()), Message("user", ()), Message.user("?"))
    fake.script("ok", "ok")
    assert [o.text for o in await both(model, ModelRequest(history))] == ["ok", "ok"]
    assert "Hi" in json.dumps(fake.last_body) and '"?"' in json.dumps(fake.last_body)


async def test_an_agent_run_with_nothing_to_send_fails_before_any_request(
    remote: tuple[str, Any, Model],
) -> None:
    _, fake, model = remote
    before = len(fake.requests)
    emptied = Agent(
        AgentConfig("a", model=model, transform_context=lambda m: [m[0].clone(content=())])
    )
    for agent, given in (
        (Agent(AgentConfig("a", model=model)), [{"role": "user", "content": []}]),
        (emptied, "Hi"),  # the pipeline left nothing
    ):
        result = await agent.run(given)
        assert not result.success and isinstance(result.exception, InvalidMessageError)
        assert "messages: nothing to send" in result.error
        events = [event async for event in agent.stream(given)]
        assert events[-1].type == "done" and not events[-1].result.success
        assert any(e.type == "error" and "nothing to send" in e.error for e in events)
    assert len(fake.requests) == before


async def test_what_an_sdk_raises_before_sending_is_a_provider_error(
    remote: tuple[str, Any, Model], monkeypatch: pytest.MonkeyPatch
) -> None:
    name, fake, _ = remote
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(key, raising=False)
    keyless = REMOTES[name].model(fake, api_key=None, max_retries=2)
    for outcome in await both(keyless, ModelRequest((Message.user("Hi"),))):
        assert isinstance(outcome, ProviderError) and not outcome.retryable
        assert str(outcome).startswith(f"{name}")
        if name in ("anthropic", "gemini"):  # their SDKs refuse to send it at all
            assert "the SDK raised" in str(outcome)
            assert ("TypeError" if name == "anthropic" else "ValueError") in str(outcome)


async def test_a_history_starting_with_the_assistant_gets_a_user_turn_first(
    remote: tuple[str, Any, Model],
) -> None:
    _, fake, model = remote
    history = (Message.assistant("Ahoy! What be yer question?"), Message.user("Why?"))
    fake.script("Because.", "Because.")
    outcomes = await both(model, ModelRequest(history, system="Talk like a pirate."))
    assert [o.text for o in outcomes] == ["Because.", "Because."]
    body = json.dumps(fake.last_body)
    assert body.index(HISTORY_START) < body.index("Ahoy!") < body.index("Why?")


async def test_a_stream_broken_midway_is_a_retryable_provider_error(
    remote: tuple[str, Any, Model],
) -> None:
    name, fake, model = remote
    fake.script(Reply("a long enough answer to be cut in the middle of its stream"))
    fake.break_next_stream()
    with pytest.raises(ProviderError) as caught:
        async for _ in model.stream(ModelRequest((Message.user("Hi"),))):
            pass
    assert caught.value.retryable and caught.value.status is None
    assert caught.value.provider == name


async def test_rate_limits_keep_status_message_and_retry_after(
    remote: tuple[str, Any, Model],
) -> None:
    name, fake, model = remote
    fake.script(ErrorReply(429, "slow down", {"retry-after": "2"}))
    with pytest.raises(ProviderError) as caught:
        await model.request(ModelRequest((Message.user("Hi"),)))
    error = caught.value
    assert (error.status, error.retryable, error.retry_after) == (429, True, 2.0)
    assert error.message == "slow down" and error.provider == name


@pytest.mark.parametrize(
    ("arguments", "raw"),
    [
        ('{"a": 1', '{"a": 1'),
        ("[1, 2]", "[1, 2]"),
        ('{"a": NaN}', '{"a": NaN}'),
        ('{"a": Infinity}', '{"a": Infinity}'),
        ("[" * 100 + "]" * 100, "[" * 100 + "]" * 100),
        ({"a": float("nan")}, '{"a": NaN}'),
        (["x"], '["x"]'),
        ("ls -la", "ls -la"),
    ],
)
def test_arguments_that_are_not_a_json_object_keep_their_raw_text(arguments: Any, raw: str) -> None:
    assert tool_call("c1", "add", arguments).input == {RAW_ARGUMENTS: raw}


def test_good_and_empty_arguments_are_the_input() -> None:
    assert tool_call("c1", "add", '{"a": 1}').input == {"a": 1}
    assert tool_call("c1", "add", {"a": [1]}).input == {"a": (1,)}
    assert tool_call("c1", "add", "").input == {}
    assert tool_call("c1", "add", None).input == {}


async def test_the_model_is_told_what_was_wrong_with_raw_arguments() -> None:
    add = Tool("add", "Adds", {"type": "object"}, lambda **kw: "never")
    result = await execute_tool_call(tool_call("c1", "add", '{"a": NaN}'), {"add": add})
    assert result.is_error
    assert result.content == (
        "Invalid input for tool 'add': the arguments are not a JSON object (finite numbers "
        'only); you sent: {"a": NaN}. Call the tool again with a JSON object.'
    )


def test_usage_counts_cached_tokens_once_whatever_the_provider_reports() -> None:
    # Anthropic reports cached tokens beside the input; OpenAI and Gemini inside it.
    beside = usage(
        input_tokens=10, output_tokens=5, cache_read=80, cache_write=20, input_includes_cache=False
    )
    inside = usage(input_tokens=90, output_tokens=5, cache_read=80, input_includes_cache=True)
    assert beside == Usage(10, 5, 80, 20) and beside.total_tokens == 115
    assert inside == Usage(10, 5, 80, 0) and inside.total_tokens == 95
    assert usage(input_tokens=None, output_tokens=None, input_includes_cache=True) == Usage()


def test_an_error_inside_a_stream_is_retryable_unless_it_names_a_bad_request() -> None:
    class StreamError(Exception):
        def __init__(self, kind: str) -> None:
            super().__init__("stream failed")
            self.status_code = 200
            self.body = {"type": "error", "error": {"type": kind, "message": f"{kind}!"}}

    overloaded = provider_error(StreamError("overloaded_error"), "anthropic")
    bad = provider_error(StreamError("invalid_request_error"), "anthropic")
    assert (overloaded.retryable, overloaded.status, overloaded.message) == (
        True,
        None,
        "overloaded_error!",
    )
    assert not bad.retryable


def test_provider_errors_survive_pickling_with_every_field() -> None:
    import pickle

    error = ProviderError("slow down", provider="openai", status=429, retryable=True, retried=True)
    error.retry_after = 2.0
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is ProviderError and str(copy) == str(error)
    assert vars(copy) == vars(error)
    refused = pickle.loads(pickle.dumps(UnsupportedContentError("no zip", provider="openai")))
    assert type(refused) is UnsupportedContentError and refused.message == "no zip"
