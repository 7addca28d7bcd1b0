"""One reader per followed session, fanned out to every stream of it.

A hundred clients following one session would otherwise each read the event
log after every change. A :class:`Feed` follows the session once (the App's
``follow()``) and hands each event to the queue of every subscriber.

Exactness does not rest on timing: events carry gapless ``seq`` numbers. A
subscriber joins the feed first, then reads the log after its own cursor
from the database, then takes queued events, skipping any ``seq`` it already
gave and reading from the database again whenever the queue shows a gap (a
feed that started later than the cursor, or a subscriber that fell behind
and was dropped by the feed). So each event is given once, in order.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["Feeds"]

QUEUE_LIMIT = 10_000  # events buffered for one slow subscriber before it reads the log itself
_END = object()
log = logging.getLogger("turnkit.server")


class _Feed:
    """The live events of one session, for its subscribers."""

    def __init__(self, app: Any, session_id: str, after: int, on_idle: Any) -> None:
        self.subscribers: set[asyncio.Queue[Any]] = set()
        self._on_idle = on_idle
        self._task = asyncio.ensure_future(self._run(app, session_id, after))

    async def _run(self, app: Any, session_id: str, after: int) -> None:
        try:
            async for event in app.follow(session_id, after):
                for queue in list(self.subscribers):
                    queue.put_nowait(event)
                    if queue.qsize() > QUEUE_LIMIT:  # too slow: it reads the log itself
                        self.subscribers.discard(queue)
                        queue.put_nowait(_END)
        except Exception:  # each subscriber then reads the log itself, and sees the error
            log.exception("following session %s failed", session_id)
        finally:
            for queue in list(self.subscribers):
                queue.put_nowait(_END)
            self.subscribers.clear()
            self._on_idle(self)

    def leave(self, queue: asyncio.Queue[Any]) -> None:
        self.subscribers.discard(queue)
        if not self.subscribers:
            self._task.cancel()

    @property
    def done(self) -> bool:
        return self._task.done()


class Feeds:
    """The feeds of one server, by session id (all on the server's event loop)."""

    def __init__(self, app: Any) -> None:
        self._app = app
        self._feeds: dict[str, _Feed] = {}

    def _join(self, session_id: str, after: int) -> tuple[_Feed, asyncio.Queue[Any]]:
        feed = self._feeds.get(session_id)
        if feed is None or feed.done:
            feed = _Feed(self._app, session_id, after, lambda f: self._forget(session_id, f))
            self._feeds[session_id] = feed
        queue: asyncio.Queue[Any] = asyncio.Queue()
        feed.subscribers.add(queue)
        return feed, queue

    def _forget(self, session_id: str, feed: _Feed) -> None:
        if self._feeds.get(session_id) is feed:
            del self._feeds[session_id]

    async def follow(self, session_id: str, after: int) -> AsyncIterator[Any]:
        """Every event of the session after ``after``, then each new one, once and in order."""
        feed, queue = self._join(session_id, after)
        last = after
        try:
            for event in await self._app.events(session_id, last):
                yield event
                last = event.seq
            while True:
                item = await queue.get()
                if item is _END:
                    break
                if item.seq <= last:
                    continue
                if item.seq > last + 1:  # a gap: the log has what the queue missed
                    for event in await self._app.events(session_id, last, item.seq - last - 1):
                        yield event
                        last = event.seq
                yield item
                last = item.seq
        finally:
            feed.leave(queue)
        # the feed ended (the session ended, or this subscriber fell behind): the log has the rest
        async for event in self._app.follow(session_id, last):
            yield event
