"""Approvals through real provider SDKs against their strict loopback fakes: the
whole answer to a held reply, sent after the decisions, is what each API accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes import FakeAnthropic, Reply, ToolCall
from fakes.gemini import FakeGemini
from turnkit import Agent, AgentConfig, Approval, tool
from turnkit.providers.anthropic import AnthropicModel
from turnkit.providers.gemini import GeminiModel

refunds: list[float] = []


@tool(needs_approval=lambda input: input["amount"] > 10)
def refund(amount: float) -> str:
    """Refund an amount."""
    refunds.append(amount)
    return f"refunded {amount:g}"


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return "paid 50"


SCRIPT = (
    Reply(
        [
            ToolCall("lookup", {"order_id": "42"}),
            ToolCall("refund", {"amount": 20}),
            ToolCall("refund", {"amount": 30}),
        ]
    ),
    Reply("Refunded 20; 30 was refused."),
)

ANTHROPIC = "claude-sonnet-4-5"


def options(url: str) -> dict[str, Any]:
    return {"base_url": url, "api_key": "test", "max_retries": 0}


PROVIDERS: dict[str, Any] = {
    "anthropic": (FakeAnthropic, lambda url: AnthropicModel(ANTHROPIC, **options(url))),
    "gemini": (FakeGemini, lambda url: GeminiModel("gemini-3-pro-preview", **options(url))),
}


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
async def test_a_resumed_reply_is_accepted_by_the_provider(provider: str) -> None:
    refunds.clear()
    fake_class, make_model = PROVIDERS[provider]
    with fake_class() as fake:
        fake.script(*SCRIPT)
        model = make_model(fake.base_url)
        agent = Agent(AgentConfig("clerk", model=model, tools=[refund, lookup]))
        first = await agent.prompt("Refund order 42")
        assert first.stop_reason == "approval_required" and len(first.approvals) == 2
        allowed, refused = (a.call_id for a in first.approvals)
        decisions = {allowed: True, refused: Approval(False, reason="over the limit")}
        second = await agent.continue_run(approvals=decisions)
        assert len(fake.requests) == 2
        sent = json.dumps(fake.requests[1].body)
    for result in ("paid 50", "refunded 20", "over the limit"):  # every call's result, sent
        assert result in sent
    assert "interrupted" not in sent
    assert second.success, second.error
    assert second.output == "Refunded 20; 30 was refused."
    assert refunds == [20.0]
    roles = [m.role for m in agent.get_history()]
    assert roles == ["user", "assistant", "user", "assistant"]
