"""Strict loopback fakes of the provider APIs, for the official SDKs to talk to.

Each fake speaks one real wire protocol on 127.0.0.1, answers from a script of
provider-neutral replies and refuses what the real provider refuses, with the
real error text, envelope and status.

Example::

    with FakeOpenAIChat(Reply([ToolCall("add", {"a": 1})]), "3") as fake:
        client = openai.OpenAI(base_url=fake.base_url + "/v1", api_key="test")
        ...
        fake.requests[-1].body  # what the SDK sent
"""

from __future__ import annotations

from ._replies import AUTO, ErrorReply, Reply, Text, Thinking, ToolCall
from ._server import FakeServer, RecordedRequest
from .anthropic import FakeAnthropic, redacted_data, thinking_signature
from .gemini import SKIP_SIGNATURE, FakeGemini, thought_signature
from .openai_chat import FakeOpenAIChat
from .openai_responses import FakeOpenAIResponses, encrypted_content

__all__ = [
    "AUTO",
    "SKIP_SIGNATURE",
    "ErrorReply",
    "FakeAnthropic",
    "FakeGemini",
    "FakeOpenAIChat",
    "FakeOpenAIResponses",
    "FakeServer",
    "RecordedRequest",
    "Reply",
    "Text",
    "Thinking",
    "ToolCall",
    "encrypted_content",
    "redacted_data",
    "thinking_signature",
    "thought_signature",
]
