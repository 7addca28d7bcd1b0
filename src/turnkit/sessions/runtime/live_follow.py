"""``follow(live=True)``: the durable events with the live deltas between them.

Exactness rests on the log, not on timing. The follower subscribes to the
hub first, then reads the deltas stored so far (so joining mid-message
gives the deltas from the start of that model call), then takes both
sources as they come:

- a durable event is given once, by ``seq`` (whatever source gave it first);
- a delta stands after the durable event ``after_seq``: the log is read up
  to there first, so no delta comes before the events it follows;
- a delta is given once per attempt (``index`` within its stream), and not
  at all once its call is over: a durable event of its turn that closes
  the call (the reply's ``message``, a tool start, the turn's end) was given
  after ``after_seq``;
- before a closing event is given, the deltas of the call it closes are read
  from the table (they are kept a while after the reply is recorded), so
  those a watcher has not brought yet (another process's, on SQLite) still
  come first: a follower that was there while a call streamed sees every
  delta of it, then its ``message``. (Calls done before it subscribed give
  nothing: their ``message`` says it all. Times are compared across
  processes, so hosts' clocks are assumed to agree within :data:`_CLOCKS_S`.)

Durable events are read as the follower reads them (bounded by a small
queue); deltas wait in the hub's bounded subscription, and a follower that
lets too many wait is dropped with :class:`~turnkit.errors.SlowFollowerError`.

A consumer that can take a delta at once (the server's SSE stream, which
writes it to its socket) passes ``give_now``: while the follower waits with
nothing else to give, the hub hands it each delta that needs no read first,
in one step for all of a session's followers on the loop, instead of waking
each follower's task (with a hundred streams, those wake-ups and the
iterators above the stream were most of the cost of a delta).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from turnkit.errors import SlowFollowerError
from turnkit.sessions.db.live import LiveRow
from turnkit.sessions.db.records import event_record
from turnkit.sessions.model.live import LiveEvent
from turnkit.sessions.model.records import Event
from turnkit.sessions.runtime.live import LiveHub

__all__ = ["CLOSING_TYPES", "follow_live"]

# Durable events of a turn that close the model call streaming before them.
CLOSING_TYPES = frozenset(
    {"message", "tool.started", "question.asked", "turn.completed", "turn.failed", "turn.cancelled"}
)
_DURABLE_QUEUE = 64
_STREAMS_KEPT = 1000
_END = object()
_SKIP, _GIVE, _CATCH_UP = object(), object(), object()  # what a delta needs (_Merge.verdict)
_CLOCKS_S = 1.0  # how far processes' clocks may disagree

ReadEvents = Callable[[int, int], Awaitable[list[Event]]]
ReadRows = Callable[[int, int], Awaitable[list[Any]]]  # the log's rows (Store.event_rows)
GiveNow = Callable[[LiveEvent], bool]


async def follow_live(
    hub: LiveHub,
    session_id: str,
    after: int,
    durable: AsyncIterator[Event],
    read_rows: ReadRows,
    give_now: GiveNow | None = None,
) -> AsyncIterator[Event | LiveEvent]:
    """``durable`` (the session's events after ``after``) merged with its live deltas.

    ``read_rows(after, limit)`` reads the log's rows directly (to catch up to a
    delta; one read serves the session's followers, each decoding its own).
    ``give_now(delta)``: a consumer that can take a delta at once, outside this
    iterator (the server writes it to its stream), and says whether it did;
    while the follower waits with nothing else to give, a delta that needs no
    read first goes there, in the hub's one step for all followers, instead
    of waking this iterator.
    """
    loop = asyncio.get_running_loop()
    sub = await asyncio.to_thread(hub.subscribe, session_id, loop)
    queue: asyncio.Queue[Any] = asyncio.Queue(_DURABLE_QUEUE)
    pump = asyncio.ensure_future(_pump(durable, queue, sub.notify))

    async def read(after: int, limit: int) -> list[Event]:
        if hub.recent is not None:  # this process's own commits, from memory
            events, _ = hub.recent.after(session_id, after, limit)
            if events:
                return events
        rows = await hub.reads.once(  # one read for the session's followers
            ("events", session_id, after, limit), lambda: read_rows(after, limit)
        )
        return [event_record(row) for row in rows]

    async def closing(turn_id: str, seqs: tuple[int, int]) -> list[LiveRow]:
        key = ("closing", session_id, turn_id, seqs)
        found = await hub.reads.once(
            key, lambda: asyncio.to_thread(hub.closing, session_id, turn_id, seqs)
        )
        return [row for row, done in found if done is None or done >= sub.since]

    merge = _Merge(after, read, sub.since, give_now)
    try:
        rows: deque[LiveRow] = deque(await asyncio.to_thread(hub.backlog, session_id))
        while True:
            if sub.dropped:
                raise SlowFollowerError(session_id, merge.last)
            if sub.closed:
                return
            rows.extend(sub.take())
            if rows:
                async for item in merge.live(rows.popleft()):
                    yield item
                continue
            if queue.empty():  # woken by a delivery or by the pump (take() cleared it)
                if give_now is not None:
                    sub.direct = merge.give_direct
                try:
                    await sub.wait()
                finally:
                    sub.direct = None
                continue
            item = queue.get_nowait()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            start = merge.closes(item)
            if start is not None:  # the call's deltas not given yet come first
                assert item.turn_id is not None
                rows.extend(sub.take())
                seqs = (start, item.seq)
                rows.extend(await closing(item.turn_id, seqs))
                while rows:
                    async for live in merge.live(rows.popleft()):
                        yield live
            for event in merge.durable(item):
                yield event
    finally:
        hub.unsubscribe(sub)
        pump.cancel()
        with contextlib.suppress(BaseException):
            await pump


async def _pump(
    durable: AsyncIterator[Event], queue: asyncio.Queue[Any], notify: Callable[[], None]
) -> None:
    """Read the durable events into ``queue``, waking the follower after each."""
    try:
        async for event in durable:
            await queue.put(event)
            notify()
        await queue.put(_END)
        notify()
    except asyncio.CancelledError:
        raise
    except Exception as err:
        await queue.put(err)
        notify()
    finally:
        with contextlib.suppress(BaseException):
            await durable.aclose()  # type: ignore[attr-defined]


class _Merge:
    """What one follower has given: the last durable seq, each stream's last index."""

    __slots__ = ("_closed", "_give_now", "_read", "_streams", "last", "since")

    def __init__(
        self, after: int, read_events: ReadEvents, since: float, give_now: GiveNow | None
    ) -> None:
        self.last = after
        self.since = since  # when the follower subscribed
        self._read = read_events
        self._closed: dict[str, int] = {}  # turn id -> seq of the last closing event given
        self._streams: dict[str, int] = {}  # stream -> last index given, oldest first
        self._give_now = give_now  # the consumer's, if it can take a delta at once

    def give_direct(self, rows: Sequence[LiveRow]) -> int:
        """Give ``rows`` to ``give_now`` while the follower waits, in order, up to the
        first that needs the follower itself (a read first, a busy consumer); how many
        were taken (given, or skipped as given already). (A durable event queued ends
        this first: ``Subscription.notify`` takes the follower's direct taker away.)"""
        give_now = self._give_now
        assert give_now is not None
        taken = 0
        for row in rows:
            verdict = self.verdict(row)
            if verdict is _GIVE:
                if not give_now(row.event):
                    break
                self.given(row)
            elif verdict is _CATCH_UP:
                break
            taken += 1
        return taken

    def durable(self, event: Event) -> list[Event]:
        if event.seq <= self.last:
            return []
        self.last = event.seq
        if event.type in CLOSING_TYPES and event.turn_id is not None:
            self._closed[event.turn_id] = event.seq
        return [event]

    def closes(self, event: Event) -> int | None:
        """If ``event`` closes a model call that may have streamed, the seq its deltas
        stand at or after (the turn's last closing event given); else None."""
        if event.seq <= self.last or event.type not in CLOSING_TYPES or event.turn_id is None:
            return None
        if event.timestamp.timestamp() < self.since - _CLOCKS_S:
            return None  # from the history: its call was done before the follower came
        return max(self._closed.get(event.turn_id, 0), 0)

    def _over(self, live: LiveEvent) -> bool:
        return self._closed.get(live.turn_id, -1) > live.after_seq

    def verdict(self, row: LiveRow) -> object:
        """Whether ``row`` is to be skipped, given now, or given after a catch-up read."""
        live = row.event
        if self._over(live) or live.index <= self._streams.get(row.stream, -1):
            return _SKIP
        return _CATCH_UP if live.after_seq > self.last else _GIVE

    def given(self, row: LiveRow) -> None:
        streams = self._streams
        if row.stream not in streams and len(streams) >= _STREAMS_KEPT:
            del streams[next(iter(streams))]  # the stream that began first
        streams[row.stream] = row.event.index

    async def live(self, row: LiveRow) -> AsyncIterator[Event | LiveEvent]:
        live = row.event
        if self.verdict(row) is _SKIP:
            return
        while live.after_seq > self.last:  # the events it follows come first
            found = await self._read(self.last, live.after_seq - self.last)
            if not found:
                break
            for event in found:
                for given in self.durable(event):
                    yield given
        if self._over(live):
            return
        self.given(row)
        yield live
