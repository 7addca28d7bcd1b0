"""The last event seq of each session that this process has seen committed.

A turn's live deltas stand after a durable event seq (a follower gives them
once it has given that event). What a model call's context holds came from
the turn's claim and from the turn's own writes, all made by this process
and all committed before the call starts; so the highest seq this process
has committed or claimed at for the session is a place after everything the
call has seen. The first delta of a call may then go out at once, with no
database read on its way (:class:`~turnkit.sessions.runtime.live_publish.TurnLive`).

Events other processes wrote meanwhile are not counted: they are no part of
the call, and a follower gives them after its deltas or before, as they
come. A session not seen here (it was forgotten, or another process ran its
turns) gets None: its caller reads the seq instead.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping

__all__ = ["SeenSeqs"]

LIMIT = 10_000  # sessions remembered, the least recently written forgotten first


class SeenSeqs:
    """Session id -> the highest event seq committed by (or claimed at in) this process."""

    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._seqs: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()  # transactions commit in several threads

    def committed(self, seqs: Mapping[str, int]) -> None:
        """Take the seqs of a transaction that committed (they never go back)."""
        with self._lock:
            known = self._seqs
            for session_id, seq in seqs.items():
                if known.get(session_id, -1) < seq:
                    known[session_id] = seq
                known.move_to_end(session_id)
            while len(known) > self._limit:
                known.popitem(last=False)

    def get(self, session_id: str) -> int | None:
        return self._seqs.get(session_id)
