"""turnkit's data model: immutable messages and content blocks.

Validated at the boundary (:func:`validate_messages`), frozen all the way
down, compared by value, and converted for models by the pipeline functions.
"""

from turnkit.errors import InvalidMessageError
from turnkit.messages._json import FrozenDict, thaw
from turnkit.messages._limits import JsonLimits, get_json_limits, set_json_limits
from turnkit.messages.blocks import (
    Base64Source,
    Block,
    CacheControl,
    FileBlock,
    ImageBlock,
    Source,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UrlSource,
)
from turnkit.messages.history import default_convert_to_llm, normalize_tool_call_history
from turnkit.messages.message import Message, Origin
from turnkit.messages.text import collapse_for_llm, message_text_body
from turnkit.messages.validate import validate_blocks, validate_messages

# The transcript converters load on first use: they cost `import turnkit` ~20 ms.
_FORMATS = frozenset(
    {
        "from_anthropic",
        "from_gemini",
        "from_openai_chat",
        "from_openai_responses",
        "to_anthropic",
        "to_gemini",
        "to_openai_chat",
        "to_openai_responses",
    }
)


def __getattr__(name: str) -> object:
    if name in _FORMATS:
        import importlib

        return getattr(importlib.import_module("turnkit.messages.formats"), name)
    raise AttributeError(f"module 'turnkit.messages' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_FORMATS})


__all__ = [
    "Base64Source",
    "Block",
    "CacheControl",
    "FileBlock",
    "FrozenDict",
    "ImageBlock",
    "InvalidMessageError",
    "JsonLimits",
    "Message",
    "Origin",
    "Source",
    "TextBlock",
    "ThinkingBlock",
    "ToolResultBlock",
    "ToolUseBlock",
    "UrlSource",
    "collapse_for_llm",
    "default_convert_to_llm",
    "from_anthropic",
    "from_gemini",
    "from_openai_chat",
    "from_openai_responses",
    "get_json_limits",
    "message_text_body",
    "normalize_tool_call_history",
    "set_json_limits",
    "thaw",
    "to_anthropic",
    "to_gemini",
    "to_openai_chat",
    "to_openai_responses",
    "validate_blocks",
    "validate_messages",
]
