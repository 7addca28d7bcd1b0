"""Provider-native transcripts to turnkit messages and back (SPEC section 10).

``from_*`` take a transcript as the provider's API takes it and return
validated :class:`~turnkit.Message` objects, or raise
:class:`~turnkit.InvalidMessageError` naming the place of anything that
cannot be represented: nothing is dropped silently. ``to_*`` take turnkit
messages (dicts or objects) and return plain JSON data for that API. Each
module documents the normalisations a round trip makes.
"""

from turnkit.messages.formats._common import ThinkingExport
from turnkit.messages.formats.anthropic import from_anthropic, to_anthropic
from turnkit.messages.formats.gemini import from_gemini, to_gemini
from turnkit.messages.formats.openai_chat import from_openai_chat, to_openai_chat
from turnkit.messages.formats.openai_responses import from_openai_responses, to_openai_responses

__all__ = [
    "ThinkingExport",
    "from_anthropic",
    "from_gemini",
    "from_openai_chat",
    "from_openai_responses",
    "to_anthropic",
    "to_gemini",
    "to_openai_chat",
    "to_openai_responses",
]
