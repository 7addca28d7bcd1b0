"""run_agent with a tool that needs approval: the held run is reported as it is."""

from __future__ import annotations

from turnkit import AgentConfig, Budget, Message, Orchestrator, ToolUseBlock, tool
from turnkit.orchestrator import TraceEvent
from turnkit.testing import ScriptedModel

from ._support import Progress

refunds: list[float] = []


@tool(needs_approval=True)
def refund(amount: float) -> str:
    """Refund an amount."""
    refunds.append(amount)
    return "refunded"


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return "paid"


REPLY = Message.assistant(
    ToolUseBlock("c1", "lookup", {"order_id": "42"}), ToolUseBlock("c2", "refund", {"amount": 5})
)


async def test_run_agent_reports_approval_required_unchanged_without_retry_or_failure() -> None:
    refunds.clear()
    model = ScriptedModel([REPLY, "unused"])
    progress, traces = Progress(), list[TraceEvent]()
    orch = Orchestrator(
        on_progress=progress, on_trace=traces.append, budget=Budget(max_tokens=10_000)
    )
    config = AgentConfig("clerk", model=model, tools=[refund, lookup])
    result = await orch.run_agent(config, "Refund order 42")
    assert result.success and result.stop_reason == "approval_required"
    assert [a.call_id for a in result.approvals] == ["c2"]
    assert len(model.requests) == 1 and refunds == []
    assert progress.types() == ["agent_start", "agent_complete"]
    complete = progress.of("agent_complete")[0].data
    assert complete["success"] is True and complete["stop_reason"] == "approval_required"
    assert [t.name for t in traces] == [
        "chat scripted",
        "execute_tool lookup",
        "invoke_agent clerk",
    ]
    agent_span = traces[-1]
    assert agent_span.status == "ok"
    assert agent_span.attributes["gen_ai.response.finish_reasons"] == ["approval_required"]
    assert complete["usage"]["input_tokens"] == result.usage.input_tokens > 0
