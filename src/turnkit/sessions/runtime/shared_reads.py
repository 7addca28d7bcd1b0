"""One read for all of a loop's followers that need the same thing at the same moment.

A hundred followers of a session are woken by one commit and each would read
the same rows; they share one read instead. A read is shared only by those
who ask for the same key while it runs, and the key says what the read must
have seen (a follower's watch version, a range of seqs): one who asks later,
or after newer changes, reads again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["SharedReads"]


class SharedReads:
    """Reads in flight on each event loop, by key."""

    def __init__(self) -> None:
        self._reads: dict[tuple[Any, ...], asyncio.Future[Any]] = {}

    async def once(self, key: tuple[Any, ...], read: Callable[[], Awaitable[Any]]) -> Any:
        """What ``read()`` returns, read once for all of this loop's callers that ask
        for ``key`` while it runs (each caller that asked raises its error)."""
        loop = asyncio.get_running_loop()
        key = (id(loop), *key)
        future = self._reads.get(key)
        if future is None or future.get_loop() is not loop:
            future = asyncio.ensure_future(read())
            self._reads[key] = future

            def done(found: asyncio.Future[Any]) -> None:
                if self._reads.get(key) is found:
                    del self._reads[key]
                if not found.cancelled():
                    found.exception()  # retrieved here; each caller raises it

            future.add_done_callback(done)
        return await asyncio.shield(future)
