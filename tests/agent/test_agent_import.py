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


def test_orchestrator_and_transcript_converters_load_on_first_use() -> None:
    code = (
        "import sys, turnkit, turnkit.messages\n"
        "lazy = ('turnkit.orchestrator', 'turnkit.messages.formats', 'turnkit.providers.edges')\n"
        "print([m for m in lazy if m in sys.modules])\n"
        "turnkit.Orchestrator, turnkit.messages.to_gemini\n"
        "print([m for m in lazy[:2] if m in sys.modules])\n"
        "print(sorted(set(turnkit.__all__) - set(dir(turnkit))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after, missing = out.stdout.strip().splitlines()
    assert before == "[]"
    assert after == "['turnkit.orchestrator', 'turnkit.messages.formats']"
    assert missing == "[]"


def test_public_errors_are_importable_from_turnkit_and_old_paths_still_work() -> None:
    import turnkit.errors
    from turnkit.tools import ToolInputError as from_tools
    from turnkit.tools.tool import ToolInputError as from_tool_module

    for name in ("ProviderError", "UnsupportedContentError", "ImagePolicyError", "ToolInputError"):
        assert name in turnkit.__all__
        assert getattr(turnkit, name) is getattr(turnkit.errors, name)
    assert from_tools is from_tool_module is turnkit.ToolInputError
    assert issubclass(turnkit.ToolInputError, turnkit.TurnkitError)


def test_turnkit_messages_exports_no_internals() -> None:
    import turnkit.messages

    for internal in ("freeze_json", "interrupted_result"):
        assert internal not in turnkit.messages.__all__
        assert not hasattr(turnkit.messages, internal)
