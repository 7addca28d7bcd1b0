"""`import turnkit` stays cheap: the agent and tools load no heavy dependency."""

from __future__ import annotations

import subprocess
import sys

import turnkit


def test_import_turnkit_loads_no_sdk_pydantic_or_jsonschema() -> None:
    code = (
        "import sys, turnkit\n"
        "heavy = ('pydantic', 'jsonschema', 'anthropic', 'openai', 'google')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_agent_names_are_exported() -> None:
    for name in ("Agent", "AgentConfig", "RunResult", "RunContext", "StreamEvent", "Tool", "tool"):
        assert name in turnkit.__all__
        assert getattr(turnkit, name) is not None
