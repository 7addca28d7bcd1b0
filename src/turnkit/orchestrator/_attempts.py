"""One try at an agent run, and when to try again."""

from __future__ import annotations

from dataclasses import dataclass

from turnkit.agent import RunResult
from turnkit.errors import ProviderError
from turnkit.providers.base import Usage

__all__ = ["Attempt", "RetryPolicy", "is_retryable", "usage_data"]


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try at a task: its RunResult, and the error behind a failure, if known."""

    result: RunResult
    error: BaseException | None = None
    cost_usd: float = 0.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently retryable failures are tried again.

    The delay before retry ``n`` (1, 2, ...) is ``base_delay * 2 ** (n - 1)``,
    capped at ``max_delay``, times a random factor between 0.5 and 1 (jitter,
    so that tasks failing together do not retry together); a provider's
    ``retry_after`` is honoured up to ``max_delay``.
    """

    max_retries: int = 2
    base_delay: float = 1.0
    max_delay: float = 30.0

    def delay(self, retry: int, error: BaseException | None) -> float:
        backoff = min(self.max_delay, self.base_delay * 2 ** (retry - 1))
        import random  # here, not at the top: keeps `import turnkit` fast

        delay = backoff * random.uniform(0.5, 1.0)
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, (int, float)) and retry_after > 0:
            delay = max(delay, min(float(retry_after), self.max_delay))
        return delay


def is_retryable(error: BaseException | None) -> bool:
    """Whether the orchestrator should try again: a ``retryable`` ProviderError
    that the provider's SDK has not already retried (one layer retries each failure)."""
    return isinstance(error, ProviderError) and error.retryable and not error.retried


def usage_data(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
    }
