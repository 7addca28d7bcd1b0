"""Work done on the start of a conversation, kept for the next call.

A conversation grows at its end, and its messages are immutable: what a pure
function made of the first N messages still holds when a later call brings
those N and a few more. :class:`PrefixMemo` keeps a few such results, each
under the tuple it was made from, and finds the longest one that starts the
tuple of a new call. Matching compares the messages themselves (by identity
first, else by value, which is what a pure function's result depends on).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

__all__ = ["PrefixMemo"]

S = TypeVar("S")


class PrefixMemo(Generic[S]):
    """The results of the last ``size`` calls, each kept with the tuple it covers.

    >>> memo: PrefixMemo[int] = PrefixMemo()
    >>> memo.store(("a", "b"), 2)
    >>> memo.find(("a", "b", "c"))
    (2, 2)
    """

    __slots__ = ("_entries", "_found", "_size")

    def __init__(self, size: int = 4) -> None:
        self._size = size
        self._entries: list[tuple[tuple[Any, ...], S]] = []
        self._found: tuple[Any, ...] | None = None

    def find(self, items: tuple[Any, ...]) -> tuple[int, S] | None:
        """(how many items it covers, the result) of the longest stored start of ``items``."""
        best: tuple[int, S] | None = None
        self._found = None
        for key, state in self._entries:
            count = len(key)
            if count > len(items) or (best is not None and count <= best[0]):
                continue
            last = items[count - 1]
            if (last is key[-1] or last == key[-1]) and items[:count] == key:
                best, self._found = (count, state), key
        return best

    def store(self, items: tuple[Any, ...], state: S) -> None:
        """Keep ``state`` as the result for ``items``, in place of the entry the
        last :meth:`find` matched (it covers less of the same conversation);
        the least recently stored entry goes when there are ``size``."""
        found, self._found = self._found, None
        if not items:
            return
        entries = [e for e in self._entries if e[0] is not found and e[0] is not items]
        entries.append((items, state))
        self._entries = entries[-self._size :]
