"""An agent with a tool, on the embedded local model: no key, no network.

Run: python examples/local_agent.py
"""

from __future__ import annotations

import turnkit
from turnkit import Agent, AgentConfig, message_text_body


@turnkit.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


agent = Agent(AgentConfig("calculator", model="local", tools=[add], max_turns=3))
result = agent.prompt_sync("Call the add tool with a=2 and b=40.")
for message in agent.get_history():
    print(f"[{message.role}] {message_text_body(message)}")
print("answer:", result.output)
