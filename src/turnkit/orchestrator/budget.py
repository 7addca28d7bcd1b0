"""Token and cost budgets, and the price table that turns tokens into USD.

A :class:`Ledger` is opened for each top-level orchestrator call
(``run_agent``, ``run_tasks``, ``run_team``) and shared by every model call
within it: planning, all tasks and the synthesis of a team run. It is
checked before each call, so a run overshoots by at most the one call that
crossed the line (with tasks running concurrently: at most one call per
running task).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from turnkit.errors import CostBudgetExceededError, TokenBudgetExceededError
from turnkit.providers.base import Usage

__all__ = [
    "DEFAULT_PRICES",
    "Budget",
    "Ledger",
    "Price",
    "model_id_of",
    "price_for",
    "unpriced_models",
]

Price = tuple[float, float] | tuple[float, float, float, float]
"""USD per million tokens: input and output, optionally then cache reads and
cache writes. Without cache prices, cached tokens cost the input price."""

# Public list prices (USD per million tokens: input, output, cache read, cache
# write) of common models. Anthropic charges 1.25x the input price to write the
# (5-minute) cache and 0.1x to read it; OpenAI and Gemini cache by themselves
# (no write charge) and discount cached reads.
# A key matches its model and any dated or suffixed version of it
# ("anthropic:claude-sonnet-4-5" matches "anthropic:claude-sonnet-4-5-20250929").
# They go out of date: pass ``prices=`` to the Orchestrator to override.
DEFAULT_PRICES: Mapping[str, Price] = {
    "anthropic:claude-opus-4-5": (5.0, 25.0, 0.5, 6.25),
    "anthropic:claude-opus-4-1": (15.0, 75.0, 1.5, 18.75),
    "anthropic:claude-opus-4": (15.0, 75.0, 1.5, 18.75),
    "anthropic:claude-sonnet-4-5": (3.0, 15.0, 0.3, 3.75),
    "anthropic:claude-sonnet-4": (3.0, 15.0, 0.3, 3.75),
    "anthropic:claude-3-7-sonnet": (3.0, 15.0, 0.3, 3.75),
    "anthropic:claude-haiku-4-5": (1.0, 5.0, 0.1, 1.25),
    "anthropic:claude-3-5-haiku": (0.8, 4.0, 0.08, 1.0),
    "openai:gpt-5": (1.25, 10.0, 0.125, 1.25),
    "openai:gpt-5-mini": (0.25, 2.0, 0.025, 0.25),
    "openai:gpt-5-nano": (0.05, 0.4, 0.005, 0.05),
    "openai:gpt-4.1": (2.0, 8.0, 0.5, 2.0),
    "openai:gpt-4.1-mini": (0.4, 1.6, 0.1, 0.4),
    "openai:gpt-4.1-nano": (0.1, 0.4, 0.025, 0.1),
    "openai:gpt-4o": (2.5, 10.0, 1.25, 2.5),
    "openai:gpt-4o-mini": (0.15, 0.6, 0.075, 0.15),
    "openai:o3": (2.0, 8.0, 0.5, 2.0),
    "openai:o4-mini": (1.1, 4.4, 0.275, 1.1),
    "gemini:gemini-2.5-pro": (1.25, 10.0, 0.125, 1.25),
    "gemini:gemini-2.5-flash": (0.3, 2.5, 0.03, 0.3),
    "gemini:gemini-2.5-flash-lite": (0.1, 0.4, 0.01, 0.1),
    "gemini:gemini-2.0-flash": (0.1, 0.4, 0.025, 0.1),
}

# Providers whose models cost nothing to call.
_FREE_PROVIDERS = frozenset({"local", "ollama"})
# Providers that share another's price list.
_SAME_PRICES = {"openai-responses": "openai"}


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits on what one orchestrated run may spend; None means no limit.

    ``max_tokens`` counts every token of every model call: input (cache
    reads and writes included) and output; ``max_cost_usd`` their cost by
    the price table, cached tokens at their own prices. Once what was spent
    reaches a limit, the next model call is refused with
    :class:`~turnkit.errors.TokenBudgetExceededError` or
    :class:`~turnkit.errors.CostBudgetExceededError`.
    """

    max_tokens: int | None = None
    max_cost_usd: float | None = None

    def __post_init__(self) -> None:
        tokens, cost = self.max_tokens, self.max_cost_usd
        if tokens is not None and (type(tokens) is not int or tokens < 0):
            raise ValueError(f"Budget.max_tokens must be an int >= 0 or None, got {tokens!r}")
        if cost is not None and (
            isinstance(cost, bool) or not isinstance(cost, (int, float)) or not cost >= 0
        ):
            raise ValueError(f"Budget.max_cost_usd must be a number >= 0 or None, got {cost!r}")


def price_for(model_id: str, prices: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model_id`` (``provider:name``), or None when unknown.

    ``prices`` (the caller's) win over :data:`DEFAULT_PRICES`; in each, the
    exact id wins, then the longest key that the id starts with followed by
    ``-``, ``@`` or ``:`` (dated and suffixed versions).
    """
    provider, _, name = model_id.partition(":")
    if provider in _FREE_PROVIDERS:
        found = _lookup(model_id, prices or {})
        return (0.0, 0.0) if found is None else found
    alias = _SAME_PRICES.get(provider)
    candidates = [model_id] if alias is None else [model_id, f"{alias}:{name}"]
    for table in (prices or {}, DEFAULT_PRICES):
        for candidate in candidates:
            found = _lookup(candidate, table)
            if found is not None:
                return found
    return None


def model_id_of(model: object) -> str:
    """``provider:name`` of a model string or Model, without resolving it."""
    found = getattr(model, "id", None)
    if isinstance(found, str):
        return found
    text = str(model)
    if text == "local":
        return "local:"
    return text.partition("@")[0]


def unpriced_models(
    models: Iterable[object], prices: Mapping[str, Price] | None = None
) -> list[str]:
    """The ids of ``models`` that have no known price, each once, in order."""
    missing: list[str] = []
    for model in models:
        model_id = model_id_of(model)
        if price_for(model_id, prices) is None and model_id not in missing:
            missing.append(model_id)
    return missing


def _lookup(model_id: str, table: Mapping[str, Price]) -> Price | None:
    if model_id in table:
        return _checked(model_id, table[model_id])
    best = ""
    for key in table:
        if len(key) > len(best) and model_id.startswith(key) and model_id[len(key)] in "-@:":
            best = key
    return _checked(best, table[best]) if best else None


def _checked(key: str, price: Price) -> Price:
    try:
        parts = tuple(float(part) for part in price)
    except (TypeError, ValueError):
        parts = ()
    if len(parts) not in (2, 4):
        raise ValueError(
            f"prices[{key!r}] must be (USD per million input tokens, per million output "
            "tokens), optionally followed by cache read and cache write prices"
        )
    if not all(math.isfinite(part) and part >= 0 for part in parts):
        raise ValueError(f"prices[{key!r}] must be finite numbers >= 0, got {price!r}")
    return parts  # type: ignore[return-value]


def cost_of(usage: Usage, price: Price | None) -> float:
    """USD for ``usage`` at ``price`` (0.0 when the price is unknown)."""
    if price is None:
        return 0.0
    read, write = (price[2], price[3]) if len(price) == 4 else (price[0], price[0])
    return (
        usage.input_tokens * price[0]
        + usage.output_tokens * price[1]
        + usage.cache_read_tokens * read
        + usage.cache_write_tokens * write
    ) / 1_000_000


class Ledger:
    """What one orchestrated run has spent, checked against its budget."""

    __slots__ = ("budget", "cost_usd", "tokens", "usage")

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.usage = Usage()
        self.tokens = 0
        self.cost_usd = 0.0

    def check(self) -> None:
        """Raise if a limit is reached: the next model call must not start."""
        budget = self.budget
        if budget.max_tokens is not None and self.tokens >= budget.max_tokens:
            raise TokenBudgetExceededError(
                f"token budget spent: {self.tokens} tokens used of max_tokens="
                f"{budget.max_tokens}; the model call was refused",
                spent=self.tokens,
                limit=budget.max_tokens,
            )
        if budget.max_cost_usd is not None and self.cost_usd >= budget.max_cost_usd:
            raise CostBudgetExceededError(
                f"cost budget spent: ${self.cost_usd:.6f} used of max_cost_usd="
                f"{budget.max_cost_usd}; the model call was refused",
                spent=self.cost_usd,
                limit=budget.max_cost_usd,
            )

    def add(self, usage: Usage, cost_usd: float) -> None:
        """Count one call's usage and cost."""
        self.usage += usage
        self.tokens += usage.total_tokens
        self.cost_usd += cost_usd
