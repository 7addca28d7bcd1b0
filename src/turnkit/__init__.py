"""turnkit: LLM agents over structured, validated, immutable message histories."""

from turnkit.agent import (
    Agent,
    AgentConfig,
    Approval,
    ApprovalRequest,
    RunContext,
    RunResult,
    StreamEvent,
)
from turnkit.agent.compaction import Compaction, compact
from turnkit.errors import (
    ContextTooLongError,
    CostBudgetExceededError,
    HopLimitError,
    ImagePolicyError,
    InvalidMessageError,
    MCPServerError,
    OutputValidationError,
    ProviderError,
    SessionEndedError,
    SessionNotFoundError,
    TokenBudgetExceededError,
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
from turnkit.providers import ImagePolicy, Model, ModelSettings, resolve_model
from turnkit.tools import Tool, tool

__version__ = "0.1.0"

# Names that load their room on first use, keeping `import turnkit` light:
# sessions (DBOS and SQLAlchemy are heavy) and the orchestrator.
_LAZY = {
    **dict.fromkeys(
        (
            "App",
            "AgentInput",
            "subagent",
            "use_input",
            "use_current_input",
            "use_tool",
            "use_session_data",
        ),
        "turnkit.sessions",
    ),
    **dict.fromkeys(
        (
            "Budget",
            "OnlineEvaluation",
            "Orchestrator",
            "ProgressEvent",
            "Task",
            "TaskResult",
            "Team",
            "TeamResult",
        ),
        "turnkit.orchestrator",
    ),
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'turnkit' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Agent",
    "AgentConfig",
    "AgentInput",
    "App",
    "Approval",
    "ApprovalRequest",
    "Base64Source",
    "Budget",
    "CacheControl",
    "Compaction",
    "ContextTooLongError",
    "CostBudgetExceededError",
    "FileBlock",
    "HopLimitError",
    "ImageBlock",
    "ImagePolicy",
    "ImagePolicyError",
    "InvalidMessageError",
    "MCPServerError",
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
    "compact",
    "default_convert_to_llm",
    "message_text_body",
    "normalize_tool_call_history",
    "resolve_model",
    "subagent",
    "tool",
    "use_current_input",
    "use_input",
    "use_session_data",
    "use_tool",
    "validate_blocks",
    "validate_messages",
]
