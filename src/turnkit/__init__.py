"""turnkit: LLM agents over structured, validated, immutable message histories."""

from turnkit.agent import Agent, AgentConfig, RunContext, RunResult, StreamEvent
from turnkit.errors import InvalidMessageError, TurnkitError
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
from turnkit.tools import Tool, tool

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentConfig",
    "Base64Source",
    "CacheControl",
    "FileBlock",
    "ImageBlock",
    "InvalidMessageError",
    "Message",
    "Origin",
    "RunContext",
    "RunResult",
    "StreamEvent",
    "TextBlock",
    "ThinkingBlock",
    "Tool",
    "ToolResultBlock",
    "ToolUseBlock",
    "TurnkitError",
    "UrlSource",
    "collapse_for_llm",
    "default_convert_to_llm",
    "message_text_body",
    "normalize_tool_call_history",
    "tool",
    "validate_blocks",
    "validate_messages",
]
