"""Models behind their wire APIs, and the rules shared by all of them.

Provider modules (``anthropic``, ``openai_chat``, ``openai_responses``,
``gemini``, ``local``) import their SDKs, so they are loaded only when a model
string names them (see :func:`resolve_model`).
"""

from turnkit.providers.base import (
    Model,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    StopReason,
    ToolSpec,
    Usage,
)
from turnkit.providers.images import ImagePolicy, apply_image_policy
from turnkit.providers.registry import register_provider, resolve_model

__all__ = [
    "ImagePolicy",
    "Model",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "StopReason",
    "ToolSpec",
    "Usage",
    "apply_image_policy",
    "register_provider",
    "resolve_model",
]
