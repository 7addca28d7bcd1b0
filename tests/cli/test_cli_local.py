"""The command line and the agent loop on the real embedded local model."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import turnkit
from turnkit import Agent, AgentConfig, ToolResultBlock, ToolUseBlock

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


def turnkit_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    return subprocess.run(
        [sys.executable, "-m", "turnkit", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def test_run_answers_on_the_local_model_offline() -> None:
    done = turnkit_cli("run", "What is the capital of France?")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert "tokens in" in done.stderr


def test_run_json_on_the_local_model() -> None:
    done = turnkit_cli("run", "Say hello.", "--json", "--system", "Answer in one word.")
    assert done.returncode == 0, done.stderr
    assert '"success": true' in done.stdout


def test_an_image_sent_to_the_local_model_exits_2(tmp_path: Path) -> None:
    image = tmp_path / "dot.png"
    image.write_bytes(PNG)
    done = turnkit_cli("run", "What is this?", "--image", str(image))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "reads text only: remove the image" in lines[0]


@turnkit.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_a_tool_call_through_the_agent_loop() -> None:
    agent = Agent(AgentConfig("calc", model="local", tools=[add], max_turns=3))
    result = await agent.run("Call the add tool with a=2 and b=40.")
    calls = [b for m in result.messages for b in m.content if isinstance(b, ToolUseBlock)]
    results = [b for m in result.messages for b in m.content if isinstance(b, ToolResultBlock)]
    assert result.success, result.error
    assert calls and calls[0].name == "add" and dict(calls[0].input) == {"a": 2, "b": 40}
    assert results[0].content == "42"
    assert len(calls) == 1  # the repeated call was held back and the model answered
