"""Agents: the model/tool loop, hooks, history, and what runs give back."""

from turnkit.agent.agent import Agent
from turnkit.agent.approvals import Approval, ApprovalRequest
from turnkit.agent.compaction import Compaction, compact
from turnkit.agent.config import AgentConfig, resolve_agent_model
from turnkit.agent.context import RunContext
from turnkit.agent.results import RunResult, StreamEvent

__all__ = [
    "Agent",
    "AgentConfig",
    "Approval",
    "ApprovalRequest",
    "Compaction",
    "RunContext",
    "RunResult",
    "StreamEvent",
    "compact",
    "resolve_agent_model",
]
