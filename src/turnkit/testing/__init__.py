"""Public helpers for testing code built on turnkit."""

from turnkit.testing.scripted import ScriptedModel, ScriptedRequest, ScriptExhaustedError

__all__ = ["ScriptExhaustedError", "ScriptedModel", "ScriptedRequest"]
