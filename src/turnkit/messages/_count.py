"""The size of a message list, counted while msgspec builds it: one walk, not two.

``validate_messages`` refuses a list of more than ``JsonLimits.max_nodes``
messages, blocks and tool_result parts, or more than ``JsonLimits.max_bytes``
characters of text (text, thinking, tool results), counted as the list would
be written out: a list or string shared many times counts each time.

The messages and the length of each content list are counted before
anything is built (cheap: no block is read), so lists shared many times
over are refused at once. The rest is counted by the blocks themselves as
msgspec builds them: each block's ``__post_init__`` adds its text, a
tool_result its parts, and every block built counts against ``max_nodes``
too, so building stops as soon as the limit is passed.
"""

from __future__ import annotations

import threading

from turnkit.messages._limits import JsonLimits

__all__ = ["Count", "OverLimit", "state"]


class OverLimit(Exception):
    """Raised inside a build when the count passes a limit (not a ValueError,
    so msgspec lets it through untouched); turned into an error at the top."""

    def __init__(self, what: str) -> None:
        self.what = what


class Count:
    """What one validation has counted so far."""

    __slots__ = ("built", "chars", "max_chars", "max_nodes", "nodes", "previous")

    def __init__(self, limits: JsonLimits, nodes: int) -> None:
        self.max_nodes = limits.max_nodes
        self.max_chars = limits.max_bytes
        self.nodes = nodes  # messages, blocks and parts as written out
        self.built = 0  # blocks built so far: never more than the nodes written out
        self.chars = 0
        self.previous: Count | None = None
        if nodes > self.max_nodes:
            raise OverLimit("nodes")

    def block(self, chars: int) -> None:
        """A block was built, holding ``chars`` characters of counted text."""
        self.built += 1
        self.chars += chars
        if self.built > self.max_nodes:
            raise OverLimit("nodes")
        if self.chars > self.max_chars:
            raise OverLimit("chars")

    def parts(self, count: int) -> None:
        """A tool_result holds ``count`` parts."""
        self.nodes += count
        if self.nodes > self.max_nodes:
            raise OverLimit("nodes")

    def __enter__(self) -> Count:
        self.previous = state.count
        state.count = self
        return self

    def __exit__(self, *exc_info: object) -> None:
        state.count = self.previous


class _State(threading.local):
    count: Count | None = None  # the validation building in this thread, if any


state = _State()
"""``state.count``: what block constructors add to (None outside a validation)."""
