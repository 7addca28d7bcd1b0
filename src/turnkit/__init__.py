"""turnkit: LLM agents over structured, validated, immutable message histories."""

from turnkit.agent import Agent, AgentConfig, RunContext, RunResult, StreamEvent
from turnkit.errors import (
    ImagePolicyError,
    InvalidMessageError,
    OutputValidationError,
    ProviderError,
    SessionEndedError,
    SessionNotFoundError,
    ToolInputError,
    TurnkitError,
    UnsupportedContentError,
)
from turnkit.messages import (
    Base64Source,
    CacheControl,
    FileBlock,
    ImageBlock,
    Message,
    Origin,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
    collapse_for_llm,
    default_convert_to_llm,
    message_text_body,
    normalize_tool_call_history,
    validate_blocks,
    validate_messages,
)
from turnkit.orchestrator import (
    Budget,
    CostBudgetExceededError,
    OnlineEvaluation,
    Orchestrator,
    ProgressEvent,
    Task,
    TaskResult,
    Team,
    TeamResult,
    TokenBudgetExceededError,
)
from turnkit.providers import ImagePolicy, Model, ModelSettings, resolve_model
from turnkit.tools import Tool, tool

__version__ = "0.1.0"

# Sessions load on first use (DBOS and SQLAlchemy are heavy): turnkit.App etc.
_SESSION_NAMES = frozenset(
    {
        "App",
        "AgentInput",
        "use_input",
        "use_current_input",
        "use_tool",
        "use_session_data",
    }
)


def __getattr__(name: str) -> object:
    if name in _SESSION_NAMES:
        import turnkit.sessions

        return getattr(turnkit.sessions, name)
    raise AttributeError(f"module 'turnkit' has no attribute {name!r}")


__all__ = [
    "Agent",
    "AgentConfig",
    "AgentInput",
    "App",
    "Base64Source",
    "Budget",
    "CacheControl",
    "CostBudgetExceededError",
    "FileBlock",
    "ImageBlock",
    "ImagePolicy",
    "ImagePolicyError",
    "InvalidMessageError",
    "Message",
    "Model",
    "ModelSettings",
    "OnlineEvaluation",
    "Orchestrator",
    "Origin",
    "OutputValidationError",
    "ProgressEvent",
    "ProviderError",
    "RunContext",
    "RunResult",
    "SessionEndedError",
    "SessionNotFoundError",
    "StreamEvent",
    "Task",
    "TaskResult",
    "Team",
    "TeamResult",
    "TextBlock",
    "ThinkingBlock",
    "TokenBudgetExceededError",
    "Tool",
    "ToolInputError",
    "ToolResultBlock",
    "ToolUseBlock",
    "TurnkitError",
    "UnsupportedContentError",
    "UrlSource",
    "collapse_for_llm",
    "default_convert_to_llm",
    "message_text_body",
    "normalize_tool_call_history",
    "resolve_model",
    "tool",
    "use_current_input",
    "use_input",
    "use_session_data",
    "use_tool",
    "validate_blocks",
    "validate_messages",
]
