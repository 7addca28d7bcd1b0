"""Steered inputs joining a running turn: picked up before each of its model calls.

An input sent with ``on_busy="steer"`` while a turn runs is stored with a
queued fallback turn of its own (see :mod:`turnkit.sessions.db.busy`). Before
each model call the turn's :class:`~.durable.DurableModel` asks
:class:`TurnSteering` for what joined it since the last call: a user message
placed after the latest tool results, added to the run's conversation and
to this call's request.

Durable as the rest of a turn: taking the inputs, their message and a step
``steer:<n>`` (``n`` the model call) commit together, before the model is
called. A replay after a crash reads that step back at the same call, and
takes nothing at a call whose reply was recorded without one (it was made
without), so the model sees the same conversation, and each input is read
once: by this turn, or, if a crash or the turn's end comes first, by its
fallback turn or the resumed turn's next call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from turnkit.messages import Message
from turnkit.sessions.db.steps import Claim, Journal, PendingWrites, steering_key

__all__ = ["TurnSteering"]


class TurnSteering:
    """What joins one running turn before its model calls."""

    def __init__(
        self,
        journal: Journal,
        claim: Claim,
        pending: PendingWrites,
        next_index: Callable[[], int],
        joined: Callable[[Message], None],
    ) -> None:
        self._journal, self._claim, self._pending = journal, claim, pending
        self._next_index = next_index  # the turn index the message takes
        self._joined = joined  # adds it to the run (conversation, message count)

    async def before_call(self, number: int, replayed: bool) -> Message | None:
        """The message that joins the turn before model call ``number`` (whose reply
        is ``replayed`` from the record), or None."""
        journal, claim = self._journal, self._claim
        if claim.resumed:
            step = await asyncio.to_thread(journal.step, claim.turn_id, steering_key(number))
            if step is not None:
                return self._join(Message.from_dict(step.result["message"]))
            if replayed:
                return None  # that call was made without one
        if not await asyncio.to_thread(journal.has_steered, claim):
            return None
        taken = self._pending.take()
        try:
            message = await asyncio.to_thread(
                journal.deliver_steered, claim, number, self._next_index(), taken
            )
        except BaseException:
            self._restore(taken)
            raise
        if message is None:
            self._restore(taken)
            return None
        return self._join(message)

    def _restore(self, taken: PendingWrites) -> None:
        """Nothing was written: what was buffered waits for the turn's next write."""
        self._pending.steps[:0] = taken.steps
        self._pending.messages[:0] = taken.messages

    def _join(self, message: Message) -> Message:
        self._joined(message)
        return message
