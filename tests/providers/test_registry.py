"""Model strings resolve to the right provider models."""

from __future__ import annotations

import pytest

from turnkit.errors import ModelNotFoundError
from turnkit.providers import Model, register_provider, resolve_model
from turnkit.testing import ScriptedModel


@pytest.mark.parametrize(
    ("spec", "cls", "provider", "name"),
    [
        ("anthropic:claude-sonnet-4-5", "AnthropicModel", "anthropic", "claude-sonnet-4-5"),
        ("openai:gpt-5", "OpenAIChatModel", "openai", "gpt-5"),
        ("openai-responses:gpt-5", "OpenAIResponsesModel", "openai-responses", "gpt-5"),
        ("gemini:gemini-2.5-flash", "GeminiModel", "gemini", "gemini-2.5-flash"),
        ("ollama:llama3.2", "OpenAIChatModel", "ollama", "llama3.2"),
    ],
)
def test_model_strings(spec: str, cls: str, provider: str, name: str) -> None:
    model = resolve_model(spec)
    assert (type(model).__name__, model.provider, model.name) == (cls, provider, name)
    assert model.id == f"{provider}:{name}"


async def test_an_openai_compatible_server_by_base_url() -> None:
    model = resolve_model("openai:qwen2.5@http://127.0.0.1:8000/v1")
    assert model.name == "qwen2.5"
    assert str(model.client.base_url) == "http://127.0.0.1:8000/v1/"


async def test_ollama_reads_its_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_BASE_URL", "http://127.0.0.1:9999/v1")
    model = resolve_model("ollama:llama3.2")
    assert str(model.client.base_url) == "http://127.0.0.1:9999/v1/"


def test_a_model_object_is_returned_as_is() -> None:
    model = ScriptedModel(["hi"])
    assert resolve_model(model) is model


@pytest.mark.parametrize("spec", ["gpt-5", "nonsense:x", "anthropic:", "", None, 5])
def test_unknown_model_strings_are_refused(spec: object) -> None:
    with pytest.raises(ModelNotFoundError):
        resolve_model(spec)  # type: ignore[arg-type]


def test_register_provider_adds_a_prefix() -> None:
    register_provider("scripted", lambda name: ScriptedModel(["hi"], name=name))
    model = resolve_model("scripted:demo")
    assert isinstance(model, Model) and model.id == "scripted:demo"


async def test_responses_on_a_self_hosted_server_needs_no_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = resolve_model("openai-responses:qwen2.5@http://127.0.0.1:8000/v1")
    assert str(model.client.base_url) == "http://127.0.0.1:8000/v1/"


async def test_openai_itself_without_a_key_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from turnkit.errors import ProviderError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ProviderError, match="OPENAI_API_KEY"):
        _ = resolve_model("openai-responses:gpt-5").client
