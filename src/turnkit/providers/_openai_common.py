"""What Chat and Responses share of the ``openai`` SDK: the client."""

from __future__ import annotations

import os
from typing import Any

import openai

from turnkit.errors import ProviderError
from turnkit.messages import thaw
from turnkit.providers.base import OutputSchema

__all__ = ["json_schema_format", "openai_client"]


def openai_client(
    provider: str, api_key: str | None, base_url: str | None, max_retries: int
) -> openai.AsyncOpenAI:
    """An ``AsyncOpenAI`` client; keys and base URL default to the SDK's variables.

    Ollama takes ``OLLAMA_API_KEY`` or none; a self-hosted compatible server
    named by ``base_url`` often wants no key, so a placeholder stands in.
    No key at all for OpenAI itself is a clear ProviderError.
    """
    key = api_key
    if key is None and provider == "ollama":
        key = os.environ.get("OLLAMA_API_KEY") or "ollama"
    elif key is None and base_url:
        key = os.environ.get("OPENAI_API_KEY") or "no-key"
    try:
        return openai.AsyncOpenAI(api_key=key, base_url=base_url, max_retries=max_retries)
    except openai.OpenAIError as err:  # no key anywhere
        raise ProviderError(str(err), provider=provider) from None


def json_schema_format(output: OutputSchema) -> dict[str, Any]:
    """The ``json_schema`` format both OpenAI APIs take (strict when the schema allows)."""
    schema = thaw(output.schema)
    out: dict[str, Any] = {"name": output.name, "schema": schema, "strict": output.strict}
    if output.description:
        out["description"] = output.description
    return out
