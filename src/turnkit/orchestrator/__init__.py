"""The orchestrator: one-off agents and teams of agents, with progress events,
tracing (``on_trace`` and OpenTelemetry), token and cost budgets, and online
evaluation of sampled runs."""

from turnkit.errors import (
    BudgetExceededError,
    CostBudgetExceededError,
    PlanError,
    TaskGraphError,
    TokenBudgetExceededError,
)
from turnkit.orchestrator.budget import DEFAULT_PRICES, Budget, price_for
from turnkit.orchestrator.evaluation import (
    EvaluationRecord,
    EvaluationStats,
    JsonlSink,
    MemorySink,
    OnlineEvaluation,
    ScoreResult,
)
from turnkit.orchestrator.events import ProgressEvent, TraceEvent
from turnkit.orchestrator.orchestrator import Orchestrator
from turnkit.orchestrator.tasks import Task, TaskResult, Team, TeamResult

__all__ = [
    "DEFAULT_PRICES",
    "Budget",
    "BudgetExceededError",
    "CostBudgetExceededError",
    "EvaluationRecord",
    "EvaluationStats",
    "JsonlSink",
    "MemorySink",
    "OnlineEvaluation",
    "Orchestrator",
    "PlanError",
    "ProgressEvent",
    "ScoreResult",
    "Task",
    "TaskGraphError",
    "TaskResult",
    "Team",
    "TeamResult",
    "TokenBudgetExceededError",
    "TraceEvent",
    "price_for",
]
