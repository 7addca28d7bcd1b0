"""Model strings to :class:`Model` objects.

``local``, ``anthropic:<model>``, ``openai:<model>`` (Chat Completions),
``openai-responses:<model>``, ``gemini:<model>``, ``ollama:<model>``; any
OpenAI-compatible server by base URL with ``openai:<model>@<base_url>``.
Provider modules are imported only when a string names them, so importing
turnkit never loads an SDK.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

from turnkit.errors import ModelNotFoundError
from turnkit.providers.base import Model

__all__ = ["register_provider", "resolve_model"]

ModelFactory = Callable[[str], Model]

_FACTORIES: dict[str, ModelFactory] = {}


def register_provider(prefix: str, factory: ModelFactory) -> None:
    """Make ``"<prefix>:<name>"`` resolve to ``factory(name)``."""
    _FACTORIES[prefix] = factory


def _lazy(module: str, cls: str, extra: str) -> ModelFactory:
    def factory(name: str) -> Model:
        try:
            found = importlib.import_module(f"turnkit.providers.{module}")
        except ImportError as err:
            raise ModelNotFoundError(
                f"{module} needs an SDK that is not installed ({err.name}); "
                f"install it with: pip install 'turnkit[{extra}]'"
            ) from None
        model_name, _, base_url = name.partition("@")
        kind = getattr(found, cls)
        return kind(model_name, base_url=base_url) if base_url else kind(model_name)

    return factory


def _ollama(name: str) -> Model:
    base_url = os.environ.get("OLLAMA_BASE_URL", "http://localhost:11434/v1")
    factory = _lazy("openai_chat", "OpenAIChatModel", "openai")
    model = factory(f"{name}@{base_url}")
    model.provider = "ollama"
    return model


register_provider("anthropic", _lazy("anthropic", "AnthropicModel", "anthropic"))
register_provider("openai", _lazy("openai_chat", "OpenAIChatModel", "openai"))
register_provider("openai-responses", _lazy("openai_responses", "OpenAIResponsesModel", "openai"))
register_provider("gemini", _lazy("gemini", "GeminiModel", "gemini"))
register_provider("ollama", _ollama)


def resolve_model(model: str | Model) -> Model:
    """The :class:`Model` for a model string; a Model object is returned as is."""
    if isinstance(model, Model):
        return model
    if not isinstance(model, str) or not model:
        raise ModelNotFoundError(f"expected a model string or a Model, got {model!r}")
    if model == "local":
        return _lazy("local", "LocalModel", "local")("")
    prefix, sep, name = model.partition(":")
    factory = _FACTORIES.get(prefix)
    if not sep or not name or factory is None:
        known = ", ".join(["local", *(f"{p}:<model>" for p in _FACTORIES)])
        raise ModelNotFoundError(f"unknown model {model!r} (use {known})")
    return factory(name)
