"""Properties of the history formats, against the strict provider fakes.

Histories are generated in each format's normal form (the shapes a round trip
keeps exactly; the normalisations have their own tests): a system prompt,
user turns with text and images, assistant turns with that provider's own
signed thinking, text and calls, and results answering every call. For each
format ``from_x(to_x(h), model=m) == h``, and ``to_x(h)``, sent with the
official SDK, is accepted by that provider's fake.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest
from google import genai
from google.genai import types
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import (
    FakeAnthropic,
    FakeGemini,
    FakeOpenAIChat,
    FakeOpenAIResponses,
    Reply,
    Text,
    encrypted_content,
    redacted_data,
    thinking_signature,
    thought_signature,
)
from turnkit.messages import (
    ImageBlock,
    Message,
    Origin,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    from_anthropic,
    from_gemini,
    from_openai_chat,
    from_openai_responses,
    to_anthropic,
    to_gemini,
    to_openai_chat,
    to_openai_responses,
)
from turnkit.messages.formats.openai_responses import reasoning_signature

PNG = "iVBORw0KGgo="
MODELS = {
    "openai": "gpt-5",
    "openai-responses": "gpt-5",
    "anthropic": "claude-sonnet-4-6",
    "gemini": "gemini-3-pro-preview",
}
FORMATS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "openai": (from_openai_chat, to_openai_chat),
    "openai-responses": (from_openai_responses, to_openai_responses),
    "anthropic": (from_anthropic, to_anthropic),
    "gemini": (from_gemini, to_gemini),
}

visible = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zs", "Zl", "Zp")),
    min_size=1,
    max_size=20,
)
call_ids = st.text(st.sampled_from("abcXYZ019_-"), min_size=1, max_size=40)
names = st.sampled_from(["add", "search_orders"])
inputs = st.dictionaries(
    st.sampled_from("abc"), st.integers(-(2**63), 2**64 - 1) | st.text(max_size=5), max_size=3
)
_counter = iter(range(10**9))


def image() -> ImageBlock:
    return ImageBlock({"type": "base64", "media_type": "image/png", "data": PNG})


def native_thinking(draw: st.DrawFn, fmt: str, first: TextBlock | ToolUseBlock) -> ThinkingBlock:
    """Thinking as ``fmt``'s own model wrote it, placed before ``first``."""
    model = MODELS[fmt]
    text = draw(visible)
    if fmt == "anthropic":
        if draw(st.booleans()):
            return ThinkingBlock("", redacted_data(model, text), redacted=True)
        return ThinkingBlock(text, thinking_signature(model, text))
    if fmt == "openai":
        return ThinkingBlock(text, draw(st.sampled_from(["reasoning_content", "reasoning"])))
    if fmt == "gemini":
        name = first.name if isinstance(first, ToolUseBlock) else "text"
        return ThinkingBlock("", thought_signature(model, name))
    item = f"rs_{next(_counter)}"
    kind = "function_call" if isinstance(first, ToolUseBlock) else "message"
    follower = f"{'fc' if kind == 'function_call' else 'msg'}_{next(_counter)}"
    return ThinkingBlock(text, reasoning_signature(item, encrypted_content(item), kind, follower))


@st.composite
def histories(draw: st.DrawFn, fmt: str) -> list[Message]:
    origin = Origin(fmt, MODELS[fmt])
    history = [Message.system(draw(visible))] if draw(st.booleans()) else []
    used: set[str] = set()
    for _ in range(draw(st.integers(1, 3))):
        user: list[Any] = [TextBlock(draw(visible))]
        if draw(st.booleans()):
            user.append(image())
        history.append(Message("user", tuple(user)))
        while True:
            calls = []
            for _ in range(draw(st.integers(0, 2))):
                call_id = draw(call_ids.filter(lambda i: i not in used))
                used.add(call_id)
                calls.append(ToolUseBlock(call_id, draw(names), draw(inputs)))
            content: list[Any] = [] if calls and draw(st.booleans()) else [TextBlock(draw(visible))]
            content += calls
            if draw(st.booleans()):
                content.insert(0, native_thinking(draw, fmt, content[0]))
            history.append(Message("assistant", tuple(content), origin=origin))
            if not calls:
                break
            history.append(Message("user", tuple(result(draw, fmt, c) for c in calls)))
    return history


def result(draw: st.DrawFn, fmt: str, call: ToolUseBlock) -> ToolResultBlock:
    if fmt in ("anthropic", "openai-responses") and draw(st.booleans()):
        return ToolResultBlock(call.id, [TextBlock("see image"), image()])
    if fmt == "openai" and draw(st.booleans()):
        return ToolResultBlock(call.id, [TextBlock(draw(visible)), TextBlock(draw(visible))])
    error = fmt in ("anthropic", "gemini") and draw(st.booleans())
    return ToolResultBlock(call.id, draw(visible), is_error=error)


@pytest.mark.parametrize("fmt", list(FORMATS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_round_trip_gives_the_history_back(fmt: str, data: st.DataObject) -> None:
    history = data.draw(histories(fmt))
    from_x, to_x = FORMATS[fmt]
    exported = to_x(history)
    json.dumps(exported)  # plain JSON data, as the APIs take it
    assert from_x(exported, model=MODELS[fmt]) == history


# -- the fakes accept every export -----------------------------------------------------


def send_openai(fake: Any, exported: Any) -> None:
    client = openai.OpenAI(base_url=fake.base_url + "/v1", api_key="test", max_retries=0)
    if isinstance(fake, FakeOpenAIChat):
        client.chat.completions.create(model=MODELS["openai"], messages=exported)
    else:
        client.responses.create(model=MODELS["openai-responses"], input=exported, store=False)


def send_anthropic(fake: Any, exported: dict[str, Any]) -> None:
    client = anthropic.Anthropic(base_url=fake.base_url, api_key="test", max_retries=0)
    client.messages.create(model=MODELS["anthropic"], max_tokens=256, **exported)


def send_gemini(fake: Any, exported: dict[str, Any]) -> None:
    options = types.HttpOptions(base_url=fake.base_url)
    client = genai.Client(api_key="test", http_options=options)
    config = (
        {"system_instruction": exported["system_instruction"]}
        if "system_instruction" in exported
        else None
    )
    client.models.generate_content(
        model=MODELS["gemini"], contents=exported["contents"], config=config
    )


SENDERS: dict[str, tuple[type, Callable[[Any, Any], None]]] = {
    "openai": (FakeOpenAIChat, send_openai),
    "openai-responses": (FakeOpenAIResponses, send_openai),
    "anthropic": (FakeAnthropic, send_anthropic),
    "gemini": (FakeGemini, send_gemini),
}


@pytest.fixture(scope="module", params=list(SENDERS))
def fake(request: pytest.FixtureRequest) -> Iterator[tuple[str, Any]]:
    with SENDERS[request.param][0]() as server:
        yield request.param, server


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_every_export_is_accepted_by_its_provider(
    fake: tuple[str, Any], data: st.DataObject
) -> None:
    fmt, server = fake
    history = data.draw(histories(fmt))
    if history[-1].role == "assistant":
        history.append(Message.user("go on"))
    server.script(Reply([Text("ok")]))
    SENDERS[fmt][1](server, FORMATS[fmt][1](history))  # raises on any refusal
