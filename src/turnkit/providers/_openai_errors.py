"""Errors of the ``openai`` SDK as turnkit errors (Chat and Responses alike)."""

from __future__ import annotations

import importlib

import openai

from turnkit.errors import ProviderError
from turnkit.providers.rules import is_retryable_status, retry_after_seconds

__all__ = ["TRANSPORT_ERRORS", "provider_error"]


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
