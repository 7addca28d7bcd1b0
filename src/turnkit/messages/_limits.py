"""How large a JSON value may be: :class:`JsonLimits`, one set per process."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_DEPTH", "MAX_INT", "MIN_INT", "JsonLimits", "get_json_limits", "set_json_limits"]

MAX_DEPTH = 64
"""Containers a JSON value may nest by default, counting the outermost one."""

MIN_INT = -(2**63)
MAX_INT = 2**64 - 1
"""The integers a JSON value may hold: what 64-bit JSON parsers (and so every
provider) take. Larger ones are refused, not rounded or crashed on later."""


@dataclass(frozen=True, slots=True)
class JsonLimits:
    """How large one JSON value (a tool input, metadata, a schema) may be.

    - ``max_nodes``: values counted as the value would be written out, so a
      list shared a thousand times counts a thousand times (default 200,000:
      more than any model writes in one tool call).
    - ``max_depth``: nested containers, counting the outermost (default 64).
    - ``max_bytes``: UTF-8 bytes of all its strings, keys included, again as
      written out (default 16 MiB).

    Change them for the whole process with :func:`set_json_limits`.
    """

    max_nodes: int = 200_000
    max_depth: int = MAX_DEPTH
    max_bytes: int = 16 * 1024 * 1024

    def __post_init__(self) -> None:
        for name in ("max_nodes", "max_depth", "max_bytes"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"JsonLimits.{name} must be a positive int, got {value!r}")


_limits = JsonLimits()


def get_json_limits() -> JsonLimits:
    """The limits in force for every JSON value validated in this process."""
    return _limits


def set_json_limits(limits: JsonLimits) -> JsonLimits:
    """Put ``limits`` in force for the whole process; returns the previous ones.

    >>> previous = set_json_limits(JsonLimits(max_nodes=1_000_000))
    >>> _ = set_json_limits(previous)
    """
    global _limits
    if not isinstance(limits, JsonLimits):
        raise TypeError(f"expected JsonLimits, got {type(limits).__name__}")
    previous, _limits = _limits, limits
    return previous
