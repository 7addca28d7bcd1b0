"""Public helpers for testing code built on turnkit."""

from turnkit.testing.scripted import ScriptedModel, ScriptedRequest, ScriptExhaustedError
from turnkit.testing.streaming import StreamingScriptedModel

__all__ = ["ScriptExhaustedError", "ScriptedModel", "ScriptedRequest", "StreamingScriptedModel"]
