"""Provider-neutral scripted replies shared by all four fake servers.

One script serves every fake: each fake renders a :class:`Reply` in its own wire
format (JSON or SSE, ids in its own grammar) and an :class:`ErrorReply` in its
own error envelope.

Example::

    Reply([Thinking("let me look"), ToolCall("get_weather", {"city": "Paris"})])
    Reply("Sunny, 21 degrees.", usage=(120, 9))
    ErrorReply(429, "slow down", headers={"retry-after": "0"})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final


class _Auto:
    """Sentinel: let the fake issue a value (a signature) the real provider would."""

    _instance: _Auto | None = None

    def __new__(cls) -> _Auto:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "AUTO"


AUTO: Final = _Auto()
"""Ask the fake to issue a valid signature (HMAC over the model and the content)."""


@dataclass(frozen=True, slots=True)
class Text:
    """Visible assistant text."""

    text: str


@dataclass(frozen=True, slots=True)
class Thinking:
    """Reasoning. ``signature=AUTO`` issues a valid one, ``None`` none at all
    (as after an interrupted stream), a string is sent verbatim.
    ``redacted=True`` renders Anthropic's ``redacted_thinking`` (others ignore it)."""

    text: str
    signature: str | _Auto | None = AUTO
    redacted: bool = False


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A function/tool call. ``id=None`` lets the fake mint one in its grammar
    (``toolu_…``, ``call_…``); ``signature`` only matters to Gemini, which signs
    the first call of a reply (``None`` leaves it unsigned)."""

    name: str
    input: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    signature: str | _Auto | None = AUTO


Part = Text | Thinking | ToolCall

NEUTRAL_STOP_REASONS: Final = ("end", "tool_use", "max_tokens")


@dataclass(frozen=True, slots=True)
class Reply:
    """A successful model turn.

    ``stop_reason`` is ``None`` (derived: ``tool_use`` when there are tool
    calls, else ``end``), one of :data:`NEUTRAL_STOP_REASONS` (mapped to each
    provider's value), or any other string, sent verbatim.
    ``usage`` is ``(input_tokens, output_tokens)``, optionally followed by
    cache reads and cache writes (rendered by the Anthropic fake).
    """

    parts: tuple[Part, ...] = ()
    stop_reason: str | None = None
    usage: tuple[int, ...] = (10, 5)

    def __post_init__(self) -> None:
        parts: Any = self.parts
        if isinstance(parts, str):
            parts = (Text(parts),)
        elif isinstance(parts, (Text, Thinking, ToolCall)):
            parts = (parts,)
        object.__setattr__(self, "parts", tuple(parts))

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The tool calls of this reply, in order."""
        return tuple(p for p in self.parts if isinstance(p, ToolCall))

    def stop(self, mapping: Mapping[str, str]) -> str:
        """The stop reason in a provider's vocabulary, given its neutral mapping."""
        reason = self.stop_reason or ("tool_use" if self.tool_calls else "end")
        return mapping.get(reason, reason)


@dataclass(frozen=True, slots=True)
class ErrorReply:
    """A scripted HTTP error. ``body`` is a message (wrapped in the provider's
    own error envelope) or a full JSON body sent as is."""

    status: int
    body: str | Mapping[str, Any] = ""
    headers: Mapping[str, str] = field(default_factory=dict)


Scripted = Reply | ErrorReply


def chunks(text: str, size: int = 7) -> list[str]:
    """Split ``text`` into stream deltas (at least one, possibly empty)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def as_script(items: Sequence[Scripted | str]) -> list[Scripted]:
    """Accept bare strings in a script as text replies."""
    return [Reply(item) if isinstance(item, str) else item for item in items]
