"""Publishing one model call's deltas: coalesced, stored, handed to followers.

A :class:`LivePublisher` lives for one model call of a turn (one attempt:
its ``stream`` id is new each time). Deltas are coalesced: a piece goes out
once 64 characters have gathered or 20 ms have passed since the last one
went out (a timer sends what waits), so a fast model makes at most one
delta per 20 ms or per 64 characters, whatever its own chunking. A change
of kind (text, thinking, another tool's input) sends what was gathered
first, so the order holds; the first delta of a call goes out at once. One
writer task hands them to this process's followers (the hub) and then stores
them for the others (each write takes whatever gathered meanwhile). The
deltas stand after the seq of the session's last event before the call.
When the turn has nothing buffered, this process knows that seq (it made or
claimed at it: :mod:`turnkit.sessions.db.seen_seqs`) and the first delta goes
out at once. Otherwise the writer's first job, in a worker thread, writes
what the turn buffered (which gives the seq) and then, in the same thread,
hands over and stores the deltas gathered meanwhile: the first delta waits
for one thread hop and that write, later ones for neither.

Live output is best effort and never fails a turn: an error storing deltas
is logged and the rest of the call streams nothing (the durable ``message``
still comes).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

from turnkit.messages import thaw
from turnkit.providers.base import ModelEvent
from turnkit.sessions.model.live import LiveEvent
from turnkit.sessions.runtime.live import LiveHub

__all__ = ["COALESCE_CHARS", "COALESCE_S", "MAX_DELTA_CHARS", "LivePublisher"]

COALESCE_S = 0.02
COALESCE_CHARS = 64
MAX_DELTA_CHARS = 1000  # one stored delta (a NOTIFY payload holds several)
log = logging.getLogger("turnkit.sessions")

_KINDS = {"text_delta": "text.delta", "thinking_delta": "thinking.delta"}


class LivePublisher:
    """The live deltas of one model call of one turn."""

    def __init__(
        self,
        hub: LiveHub,
        session_id: str,
        turn_id: str,
        step: str,
        flush: Callable[[], int] | int,
    ) -> None:
        """``flush``: the seq the deltas stand after, or what writes what the turn
        buffered and returns it (blocking)."""
        self._hub, self._session_id, self._turn_id, self._step = hub, session_id, turn_id, step
        self._stream = uuid.uuid4().hex
        self._loop = asyncio.get_running_loop()
        self._kind: tuple[str, str | None, str | None] | None = None  # (type, call id, name)
        self._parts: list[str] = []
        self._chars = 0
        self._last = -1.0  # when a delta last went out (loop time)
        self._timer: asyncio.TimerHandle | None = None
        self._drafts: list[tuple[str, dict[str, Any]]] = []
        self._drafts_lock = threading.Lock()  # the writer's first job takes them in a thread
        self._index = 0  # the next delta's index in this call
        self._after_seq = flush if isinstance(flush, int) else -1  # once flush() wrote it
        self._wake = asyncio.Event()
        self._closing = False
        self._streamed_input: set[str] = set()  # calls whose input came in pieces
        self._writer = asyncio.ensure_future(self._write(flush))

    # -- what the model streams ----------------------------------------------------

    def add(self, event: ModelEvent) -> None:
        """Take one event of the model's stream."""
        kind = _KINDS.get(event.type)
        if kind is not None:
            if event.text:
                self._gather((kind, None, None), event.text)
            return
        call = event.tool_call
        if call is None:
            return
        if event.type == "tool_input_delta":
            self._streamed_input.add(call.id)
            if event.text:
                self._gather(("tool_input.delta", call.id, call.name), event.text)
        elif event.type == "tool_use" and call.id not in self._streamed_input:
            text = json.dumps(thaw(call.input), ensure_ascii=False)
            self._gather(("tool_input.delta", call.id, call.name), text)

    def _gather(self, kind: tuple[str, str | None, str | None], text: str) -> None:
        if self._parts and kind != self._kind:
            self._send()
        self._kind = kind
        self._parts.append(text)
        self._chars += len(text)
        now = self._loop.time()
        if self._chars >= COALESCE_CHARS or now - self._last >= COALESCE_S:
            self._send()
        elif self._timer is None:
            self._timer = self._loop.call_at(self._last + COALESCE_S, self._send)

    def _send(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._parts or self._kind is None:
            return
        kind, call_id, name = self._kind
        text = "".join(self._parts)
        self._parts, self._chars = [], 0
        self._last = self._loop.time()
        with self._drafts_lock:
            for start in range(0, len(text), MAX_DELTA_CHARS):
                piece = text[start : start + MAX_DELTA_CHARS]
                data: dict[str, Any] = {"text": piece}
                if call_id is not None:
                    data = {"call_id": call_id, "name": name, "text": piece}
                self._drafts.append((kind, data))
        self._wake.set()

    # -- storing -------------------------------------------------------------------

    async def _write(self, flush: Callable[[], int] | int) -> None:
        try:
            if not isinstance(flush, int):
                await asyncio.to_thread(self._first, flush)
            while True:
                await self._wake.wait()
                self._wake.clear()
                handed = self._hub.hand_over(self._stream, self._take())
                if handed.rows:
                    await handed.wait()  # this process's followers first (see LiveHub)
                    await asyncio.to_thread(self._hub.store, self._step, handed.rows)
                if self._closing and not self._drafts:
                    return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.warning("turnkit: live output of turn %s stopped", self._turn_id, exc_info=True)

    def _first(self, flush: Callable[[], int]) -> None:
        """The writer's first job (blocking): what the turn buffered, then the deltas
        gathered while that was written."""
        self._after_seq = flush()
        events = self._take()
        if events:
            self._hub.publish(self._step, self._stream, events)

    def _take(self) -> list[LiveEvent]:
        """The deltas gathered so far, numbered (by the writer only, one job at a time)."""
        with self._drafts_lock:
            drafts, self._drafts = self._drafts, []
        index, after_seq = self._index, self._after_seq
        self._index += len(drafts)
        return [
            LiveEvent(self._session_id, self._turn_id, after_seq, kind, index + i, data)
            for i, (kind, data) in enumerate(drafts)
        ]

    async def finish(self) -> None:
        """Send what is gathered and wait until every delta is stored: the reply may
        then be recorded (which forgets them)."""
        self._send()
        self._closing = True
        self._wake.set()
        with contextlib.suppress(Exception):  # an error was logged: the reply still comes
            await self._writer

    def abort(self) -> None:
        """The call failed or was cancelled: stop (what was stored is marked done with the turn)."""
        if self._timer is not None:
            self._timer.cancel()
        self._writer.cancel()


class TurnLive:
    """What a turn's durable model needs to stream live: a publisher per model call."""

    def __init__(self, hub: LiveHub, journal: Any, claim: Any, pending: Any) -> None:
        self._hub, self._journal, self._claim, self._pending = hub, journal, claim, pending

    def publisher(self, step: str) -> LivePublisher:
        """The publisher of model call ``step``. What the turn has buffered is written
        first (meanwhile the call starts), so the deltas follow the durable events
        before them, tool results included; with nothing buffered they stand after
        the session's last event this process has seen committed."""
        taken = self._pending.take()
        claim = self._claim
        seen = None
        if not (taken.steps or taken.messages):  # nothing to write first
            seen = self._journal.store.seen_seqs.get(claim.session_id)
        flush = functools.partial(self._flush, taken) if seen is None else seen
        return LivePublisher(self._hub, claim.session_id, claim.turn_id, step, flush)

    def _flush(self, taken: Any) -> int:
        claim = self._claim
        try:
            return int(self._journal.flush(claim.session_id, claim.turn_id, taken))
        except BaseException:  # written with the turn's next write instead
            self._pending.steps[:0] = taken.steps
            self._pending.messages[:0] = taken.messages
            raise
