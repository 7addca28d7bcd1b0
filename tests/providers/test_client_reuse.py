"""One model used across successive ``asyncio.run()`` calls: no noise, no failure.

Each call runs on a new event loop; the SDK client of a finished loop must be
closed on that loop, not left for the garbage collector to close on a closed
loop ("Event loop is closed", unclosed transports).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from fakes import FakeAnthropic, FakeGemini, FakeOpenAIChat, FakeOpenAIResponses, Reply
from turnkit.messages import Message
from turnkit.providers.anthropic import AnthropicModel
from turnkit.providers.base import Model, ModelRequest
from turnkit.providers.gemini import GeminiModel
from turnkit.providers.openai_chat import OpenAIChatModel
from turnkit.providers.openai_responses import OpenAIResponsesModel

REQUEST = ModelRequest((Message.user("hi"),))

PROVIDERS: dict[str, tuple[Any, Callable[[Any], Model]]] = {
    "anthropic": (
        FakeAnthropic,
        lambda f: AnthropicModel("claude-sonnet-4-6", base_url=f.base_url, api_key="test"),
    ),
    "openai": (
        FakeOpenAIChat,
        lambda f: OpenAIChatModel("gpt-4o", base_url=f.base_url + "/v1", api_key="test"),
    ),
    "openai-responses": (
        FakeOpenAIResponses,
        lambda f: OpenAIResponsesModel("gpt-4o", base_url=f.base_url + "/v1", api_key="test"),
    ),
    "gemini": (
        FakeGemini,
        lambda f: GeminiModel("gemini-2.5-flash", base_url=f.base_url, api_key="test"),
    ),
}


async def _stream(model: Model) -> str:
    text = ""
    async for event in model.stream(REQUEST):
        text += event.text or ""
    return text


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_successive_asyncio_runs_reuse_a_model_without_noise(
    provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake_type, make = PROVIDERS[provider]
    with fake_type() as fake, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        fake.script(*(Reply(f"answer {i}") for i in range(6)))
        model = make(fake)
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            texts = []
            for _ in range(3):
                texts.append(asyncio.run(_stream(model)))
                texts.append(asyncio.run(model.request(REQUEST)).text)
                gc.collect()
    assert texts == [f"answer {i}" for i in range(6)]
    assert not [r for r in caplog.records if "Event loop is closed" in r.getMessage()]
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
