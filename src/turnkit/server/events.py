"""``GET /sessions/{id}/events``: the event log as JSON, or live as Server-Sent Events.

With ``Accept: text/event-stream`` the answer is a stream (:mod:`turnkit.server.sse`):
each event's ``id:`` is its ``seq``, its ``event:`` its type and its
``data:`` the event as JSON. It starts strictly after ``Last-Event-ID`` (or
``after``) and follows the App's ``follow()``, which reads the log by
``seq`` (through one shared reader per session, :mod:`turnkit.server.feeds`):
an event written while the stream starts is sent once, never skipped.
Comments keep the connection alive while nothing happens; the stream ends
once the session has ended and its last event was sent, or when the server
stops (the stream is then closed properly, and the client resumes from its
``Last-Event-ID`` elsewhere). With ``?live=true`` the stream also carries
the live deltas (:mod:`turnkit.server.live`), without ``id:`` lines.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Header, Path, Query, Request

from turnkit.server.models import EventOut
from turnkit.server.problems import problem, responses
from turnkit.sessions.model.checks import MAX_SEQ

__all__ = ["PING_SECONDS", "events_route"]

PING_SECONDS = 15.0


# The SSE frames of the latest events sent: a session's feed (and the live hub)
# hands one object to all of its streams, so a hundred followers encode it once. An
# entry holds its object, so the id is not reused while it is cached.
_ENCODED: OrderedDict[int, tuple[Any, bytes]] = OrderedDict()
_ENCODED_KEPT = 512


def encoded(item: Any, encode: Callable[[Any], bytes]) -> bytes:
    """``encode(item)``, computed once for an object all of a session's streams send."""
    found = _ENCODED.get(id(item))
    if found is not None and found[0] is item:
        return found[1]
    data = encode(item)
    _ENCODED[id(item)] = (item, data)
    while len(_ENCODED) > _ENCODED_KEPT:
        _ENCODED.popitem(last=False)
    return data


def _wants_stream(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "").lower()


def _seq_of(header: str) -> int | None:
    """A ``Last-Event-ID`` as a seq, checked before the stream starts (None if it is not one)."""
    if not header.isascii() or not header.isdigit() or int(header) > MAX_SEQ:
        return None
    return int(header)


def events_route(router: APIRouter, app: Any, ping: float = PING_SECONDS) -> None:
    """Add the events route to ``router`` (``ping``: seconds between keep-alive comments)."""
    from turnkit.server.feeds import Feeds

    feeds = Feeds(app)

    @router.get(
        "/sessions/{session_id}/events",
        response_model=list[EventOut],
        responses={
            200: {
                "description": "the events, oldest first; a live stream when asked for",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        }
        | responses(400, 404, 422),
    )
    async def events(
        request: Request,
        session_id: str = Path(min_length=1, max_length=64),
        after: int = Query(0, ge=0, le=MAX_SEQ, description="only events with a higher seq"),
        limit: int | None = Query(None, ge=1, le=10_000),
        live: bool = Query(
            False, description="SSE only: also the deltas of model calls as they stream"
        ),
        last_event_id: str | None = Header(None, max_length=20),
    ) -> Any:
        """The session's events after ``after`` (JSON), or followed live (SSE)."""
        if not _wants_stream(request):
            found = await app.events(session_id, after, limit)
            return [event.to_dict() for event in found]
        if last_event_id is not None:
            resumed = _seq_of(last_event_id)
            if resumed is None:
                detail = (
                    f"Last-Event-ID must be an event seq (0 to {MAX_SEQ}), got {last_event_id!r}"
                )
                return problem(400, detail)
            after = resumed
        await app.get_session(session_id)  # a 404 now, not an empty stream
        if live:
            from turnkit.server.live import live_items

            stream = _stream(None, ping)  # deltas may be written to it directly
            stream.frames = _frames(live_items(app, feeds, session_id, after, stream.write_now))
            return stream
        return _stream(feeds.follow(session_id, after), ping)

    return None


def _stream(items: AsyncIterator[Any] | None, ping: float) -> Any:
    from turnkit.server.sse import EventStream

    return EventStream(None if items is None else _frames(items), ping)


async def _frames(items: AsyncIterator[Any]) -> AsyncIterator[bytes]:
    """Each event as its SSE frame (``id:`` its seq), built once for all streams;
    frames already built (live deltas, the end of a slow stream) as they are."""
    try:
        async for item in items:
            yield item if isinstance(item, bytes) else encoded(item, _event_frame)
    finally:
        await items.aclose()  # type: ignore[attr-defined]


def _event_frame(event: Any) -> bytes:
    from turnkit.server.sse import frame

    data = EventOut.model_validate(event.to_dict()).model_dump_json()
    return frame(data, event=event.type, id=str(event.seq))
