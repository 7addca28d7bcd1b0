"""The size of a message list, counted while msgspec builds it: one walk, not two.

``validate_messages`` refuses a list of more than ``JsonLimits.max_nodes``
messages, blocks and tool_result parts, or more than ``JsonLimits.max_bytes``
characters of text (text, thinking, tool results), counted as the list would
be written out: a list or string shared many times counts each time.

The messages and the length of each content list are counted before
anything is built (cheap: no block is read), so lists shared many times
over are refused at once. The rest is counted by the blocks themselves as
msgspec builds them: each block's ``__post_init__`` takes its text off
``chars_left``, a tool_result its parts off ``nodes_left``, and every block
built takes one off ``built_left``, so building stops as soon as a limit is
passed. Each block does that inline (two subtractions and one test: a
method call would cost more than the counting), then calls :meth:`over`
when something went below zero.
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import Any

from turnkit.messages._limits import JsonLimits

__all__ = ["Count", "OverLimit", "current"]


class OverLimit(Exception):
    """Raised inside a build when the count passes a limit (not a ValueError,
    so msgspec lets it through untouched); turned into an error at the top."""

    def __init__(self, what: str) -> None:
        self.what = what


class Count:
    """What one validation may still hold; each budget below zero is over a limit."""

    __slots__ = ("built_left", "chars_left", "frozen", "nodes_left", "token")

    def __init__(
        self, limits: JsonLimits, nodes: int, frozen: dict[int, Any] | None = None
    ) -> None:
        self.nodes_left = limits.max_nodes - nodes  # messages, blocks and parts written out
        self.built_left = limits.max_nodes  # blocks built: never more than those written out
        self.chars_left = limits.max_bytes
        self.frozen = frozen or {}  # tool inputs frozen ahead, {id(input): frozen}, held alive
        self.token: Token[Count | None] | None = None
        if self.nodes_left < 0:
            raise OverLimit("nodes")

    def over(self) -> None:
        """Raise for the budget that went below zero (nodes first)."""
        if self.built_left < 0 or self.nodes_left < 0:
            raise OverLimit("nodes")
        if self.chars_left < 0:
            raise OverLimit("chars")

    def __enter__(self) -> Count:
        self.token = _current.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self.token is not None
        _current.reset(self.token)


_current: ContextVar[Count | None] = ContextVar("turnkit_message_count", default=None)

current = _current.get
"""The validation building in this thread (its context), if any: what block
constructors count against."""
