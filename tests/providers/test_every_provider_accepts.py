"""Property: any valid history, once through the pipeline, is accepted by every provider.

Histories are generated turn by turn: user text (sometimes blank), images,
assistant text, tool calls with odd ids (answered, partly answered or not at
all), results with images, and thinking that is foreign, unsigned or signed
by the very model being called. After ``normalize_tool_call_history`` each
provider converts it and its strict fake must answer 200 (a history left with
only blank text and thinking is refused with InvalidMessageError before any
request, the documented rule). Streaming and non-streaming must give the same
final message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import FakeAnthropic, FakeOpenAIChat, FakeOpenAIResponses, Reply, Text, ToolCall
from fakes.anthropic import thinking_signature
from fakes.gemini import FakeGemini, thought_signature
from turnkit import (
    ImageBlock,
    InvalidMessageError,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    normalize_tool_call_history,
)
from turnkit.messages import Origin
from turnkit.providers import Model, ModelRequest, ModelSettings, ToolSpec
from turnkit.providers.anthropic import AnthropicModel
from turnkit.providers.gemini import GeminiModel
from turnkit.providers.openai_chat import OpenAIChatModel
from turnkit.providers.openai_responses import OpenAIResponsesModel

PNG = "iVBORw0KGgo="
NAMES = ("add", "search_orders")
TOOLS = tuple(ToolSpec(name, f"The {name} tool", {"type": "object"}) for name in NAMES)

# provider -> (fake, model factory, model name, signer for native thinking before a call)
Signer = Callable[[str, str], ThinkingBlock]
PROVIDERS: dict[str, tuple[type, Callable[..., Model], str, Signer | None]] = {
    "anthropic": (
        FakeAnthropic,
        AnthropicModel,
        "claude-sonnet-4-6",
        lambda model, name: ThinkingBlock("plan", thinking_signature(model, "plan")),
    ),
    "openai": (FakeOpenAIChat, OpenAIChatModel, "gpt-5", None),
    "openai-responses": (FakeOpenAIResponses, OpenAIResponsesModel, "gpt-5", None),
    "gemini": (
        FakeGemini,
        GeminiModel,
        "gemini-3-pro-preview",
        lambda model, name: ThinkingBlock("", thought_signature(model, name)),
    ),
}

texts = st.one_of(
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=30),
    st.sampled_from([" ", "\n", "hello", "What is 2+2?"]),
)
odd_ids = st.text(st.sampled_from("abcXYZ019_-|.:/ é"), min_size=1, max_size=90).filter(
    lambda s: s.strip()
)
inputs = st.dictionaries(
    st.sampled_from("abc"), st.integers(-(2**63), 2**64 - 1) | st.text(max_size=5), max_size=3
)


def image() -> ImageBlock:
    return ImageBlock({"type": "base64", "media_type": "image/png", "data": PNG})


@st.composite
def histories(draw: st.DrawFn, provider: str) -> list[Message]:
    _, _, model, signer = PROVIDERS[provider]
    history: list[Message] = []
    for turn in range(draw(st.integers(1, 5))):
        user: list[Any] = [TextBlock(draw(texts))]
        if draw(st.booleans()):
            user.append(image())
        history.append(Message("user", tuple(user)))
        calls = [
            ToolUseBlock(f"{draw(odd_ids)}#{turn}.{k}", draw(st.sampled_from(NAMES)), draw(inputs))
            for k in range(draw(st.integers(0, 3)))
        ]
        history.append(assistant_turn(draw, provider, model, signer, calls))
        answered = [c for c in calls if draw(st.booleans())]
        if answered or (calls and draw(st.booleans())):
            history.append(Message("user", tuple(result(draw, c) for c in answered)))
    if history[-1].role == "assistant" and not draw(st.booleans()):
        history.append(Message.user("go on"))
    return history


def assistant_turn(
    draw: st.DrawFn, provider: str, model: str, signer: Signer | None, calls: list[ToolUseBlock]
) -> Message:
    thinking = draw(st.sampled_from(["none", "foreign", "unsigned", "native"]))
    content: list[Any] = []
    origin = Origin(provider, model)
    if thinking == "foreign":
        content.append(ThinkingBlock("elsewhere", "sig"))
        origin = Origin("other", "model")
    elif thinking == "unsigned":
        content.append(ThinkingBlock("no signature"))
    elif thinking == "native" and signer is not None and calls:
        content.append(signer(model, calls[0].name))
    if draw(st.booleans()) or not calls:
        content.append(TextBlock(draw(texts)))
    content.extend(calls)
    return Message("assistant", tuple(content), origin=origin)


def result(draw: st.DrawFn, call: ToolUseBlock) -> ToolResultBlock:
    if draw(st.booleans()):
        return ToolResultBlock(call.id, [TextBlock("see image"), image()])
    return ToolResultBlock(call.id, draw(texts), is_error=draw(st.booleans()))


@pytest.fixture(scope="module", params=list(PROVIDERS))
def provider(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any, Model]]:
    name = request.param
    fake_class, factory, model_name, _ = PROVIDERS[name]
    with fake_class() as fake:
        base_url = fake.base_url + ("/v1" if name.startswith("openai") else "")
        yield name, fake, factory(model_name, base_url=base_url, api_key="test", max_retries=0)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_valid_history_is_accepted(
    provider: tuple[str, Any, Model], data: st.DataObject
) -> None:
    name, fake, model = provider
    history = normalize_tool_call_history(data.draw(histories(name)))
    thinking = data.draw(st.sampled_from([None, 1024]))
    request = ModelRequest(tuple(history), "Be brief.", TOOLS, ModelSettings(thinking=thinking))
    reply = Reply([Text("Done."), ToolCall("add", {"a": 1})])
    fake.script(reply, reply)

    async def both() -> tuple[Any, Any]:
        whole = await model.request(request)
        events = [event async for event in model.stream(request)]
        return whole, events[-1].response

    before = len(fake.requests)
    try:
        whole, streamed = asyncio.run(both())
    except InvalidMessageError as err:  # only blank text (and thinking) was left to send
        assert "nothing to send" in str(err) and len(fake.requests) == before
        assert all(
            isinstance(b, ThinkingBlock) or (isinstance(b, TextBlock) and not b.text.strip())
            for m in history
            for b in m.content
        )
        while fake.pending:
            fake.next_reply(None)
        return
    assert whole.text == "Done." and whole.tool_calls[0].name == "add"
    assert streamed.message.content == whole.message.content or _same_but_ids(streamed, whole)


def _same_but_ids(streamed: Any, whole: Any) -> bool:
    """Fakes mint fresh call ids per reply; everything else must match."""

    def shape(response: Any) -> list[Any]:
        return [
            (b.type, b.name, dict(b.input)) if isinstance(b, ToolUseBlock) else b
            for b in response.message.content
            if not isinstance(b, ThinkingBlock)
        ]

    return shape(streamed) == shape(whole)
