"""Live deltas over SSE (``GET /sessions/{id}/events?live=true``).

Each :class:`~turnkit.sessions.LiveEvent` goes out as an SSE event named by
its type (``text.delta``, ``thinking.delta``, ``tool_input.delta``) with the
LiveEvent's fields as JSON and no ``id:`` line, so ``Last-Event-ID`` stays
the seq of the last durable event: a reconnect resumes the log exactly, and
gets the deltas of a model call still streaming from its start again.

The durable events come from the server's shared reader of the session
(:mod:`turnkit.server.feeds`); the deltas from the App's live hub. A client
that does not read is dropped: the stream ends with an event named
``dropped`` (``{"reason": "too_slow", "last_event_id": seq}``); reconnect
with that ``Last-Event-ID``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from turnkit.errors import SlowFollowerError

__all__ = ["live_items"]


async def live_items(
    app: Any,
    feeds: Any,
    session_id: str,
    after: int,
    write_now: Callable[[bytes], bool] | None = None,
) -> AsyncIterator[Any]:
    """The session's durable events and live deltas after ``after``, as the SSE
    route sends them (events as they are, deltas as their SSE frames).

    ``write_now(frame)``: writes a delta's frame to the stream at once when it can
    (the live hub then serves all of a session's streams in one step)."""
    from turnkit.server.events import encoded
    from turnkit.server.sse import frame
    from turnkit.sessions.model.live import LiveEvent
    from turnkit.sessions.runtime.live_follow import follow_live

    runtime = app.runtime
    store = runtime.store

    async def read(after: int, limit: int) -> list[Any]:
        return await asyncio.to_thread(store.event_rows, session_id, after, limit)

    give_now = None if write_now is None else _writing_frames(write_now)
    durable = feeds.follow(session_id, after)
    merged = follow_live(runtime.live, session_id, after, durable, read, give_now)
    try:
        async for item in merged:
            if isinstance(item, LiveEvent):
                yield encoded(item, _live_frame)
            else:
                yield item
    except SlowFollowerError as err:
        data = json.dumps({"reason": "too_slow", "last_event_id": err.last_seq})
        yield frame(data, event="dropped")
    finally:
        await merged.aclose()  # type: ignore[attr-defined]


def _writing_frames(write_now: Callable[[bytes], bool]) -> Callable[[Any], bool]:
    """``write_now`` of each delta's frame. The hub hands one delta to all of a
    session's streams in turn, so the frame built for the first is the others'."""

    def give_now(event: Any) -> bool:
        global _last
        last = _last
        if last[0] is not event:
            last = _last = (event, _live_frame(event))
        return write_now(last[1])

    return give_now


_last: tuple[Any, bytes] = (None, b"")  # the latest delta given, and its frame


def _live_frame(event: Any) -> bytes:
    from turnkit.server.sse import frame

    return frame(json.dumps(event.to_dict(), ensure_ascii=False), event=event.type)
