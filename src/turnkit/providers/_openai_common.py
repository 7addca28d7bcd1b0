"""What Chat and Responses share of the ``openai`` SDK: the client and the errors."""

from __future__ import annotations

import importlib
import os

import openai

from turnkit.errors import ProviderError
from turnkit.providers.rules import is_retryable_status, retry_after_seconds

__all__ = ["TRANSPORT_ERRORS", "openai_client", "provider_error"]


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


def _transport_errors() -> tuple[type[Exception], ...]:
    """What a broken connection raises mid-stream: the SDK does not wrap it.

    The SDK is built on ``httpx2`` (older releases: ``httpx``).
    """
    found = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except ImportError:
            continue
    return tuple(found)


TRANSPORT_ERRORS = _transport_errors()


def provider_error(err: openai.APIError, provider: str) -> ProviderError:
    """The ProviderError for an SDK error: the body's message, status, retryability."""
    if isinstance(err, openai.APIStatusError):
        body = err.body if isinstance(err.body, dict) else {}
        message = body.get("message") if isinstance(body.get("message"), str) else None
        return ProviderError(
            message or err.message,
            provider=provider,
            status=err.status_code,
            retryable=is_retryable_status(err.status_code),
            retry_after=retry_after_seconds(err.response.headers),
        )
    # Connection failures, timeouts and errors sent inside a stream.
    return ProviderError(err.message or str(err), provider=provider, retryable=True)
