"""Validate a structured history and see what a model would be sent.

Run: python examples/quickstart.py
"""

from __future__ import annotations

import turnkit
from turnkit import message_text_body, normalize_tool_call_history, validate_messages

history = [
    {"role": "user", "content": [{"type": "text", "text": "What's the weather in Paris?"}]},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me check."},
            {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
        ],
    },
    {"role": "user", "content": [{"type": "text", "text": "Actually, never mind."}]},
]

messages = validate_messages(history)
history[1]["content"][1]["input"]["city"] = "Berlin"  # changes nothing: messages are frozen copies

for message in normalize_tool_call_history(messages):
    print(f"[{message.role}]\n{message_text_body(message)}\n")

try:
    validate_messages([{"role": "user", "content": "a bare string"}])
except turnkit.InvalidMessageError as err:
    print("refused:", err)
