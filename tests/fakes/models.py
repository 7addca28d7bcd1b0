"""Each remote provider's Model pointed at its loopback fake, for cross-provider tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from turnkit.providers import Model

from ._server import FakeServer
from .anthropic import FakeAnthropic
from .gemini import FakeGemini
from .openai_chat import FakeOpenAIChat
from .openai_responses import FakeOpenAIResponses


@dataclass(frozen=True, slots=True)
class Remote:
    """A provider: its fake, how to build its Model, and the model name used."""

    provider: str
    fake: type[FakeServer]
    model_name: str
    suffix: str = ""  # what the SDK's base URL adds to the fake's (OpenAI: "/v1")

    def model(self, fake: FakeServer, **options: Any) -> Model:
        make: Callable[..., Model] = _factory(self.provider)
        options.setdefault("max_retries", 0)
        options.setdefault("api_key", "test")  # None: the SDK looks for one itself
        return make(self.model_name, base_url=fake.base_url + self.suffix, **options)


REMOTES: dict[str, Remote] = {
    "anthropic": Remote("anthropic", FakeAnthropic, "claude-sonnet-4-6"),
    "openai": Remote("openai", FakeOpenAIChat, "gpt-5", "/v1"),
    "openai-responses": Remote("openai-responses", FakeOpenAIResponses, "gpt-5", "/v1"),
    "gemini": Remote("gemini", FakeGemini, "gemini-3-pro-preview"),
}


def _factory(provider: str) -> Callable[..., Model]:
    if provider == "anthropic":
        from turnkit.providers.anthropic import AnthropicModel

        return AnthropicModel
    if provider == "openai":
        from turnkit.providers.openai_chat import OpenAIChatModel

        return OpenAIChatModel
    if provider == "openai-responses":
        from turnkit.providers.openai_responses import OpenAIResponsesModel

        return OpenAIResponsesModel
    from turnkit.providers.gemini import GeminiModel

    return GeminiModel


@contextmanager
def serve(provider: str, **options: Any) -> Iterator[tuple[FakeServer, Model]]:
    """The fake of ``provider``, running, and a Model that talks to it."""
    remote = REMOTES[provider]
    with remote.fake() as fake:
        yield fake, remote.model(fake, **options)
