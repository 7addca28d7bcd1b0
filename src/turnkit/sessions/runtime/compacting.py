"""Compaction in a session turn: the summary is a recorded step, its message stored in place.

The one agent loop decides and compacts before a model call
(:func:`turnkit.agent.compaction.plan_compaction`), as it does for
``prompt()``. A session turn adds durability and nothing else:

- the summariser is a :class:`RecordedSummariser`: a replay after a crash
  answers from the turn's step ``compaction:<n>`` instead of summarising
  again (a failure is recorded too, so a replay decides as the first run
  did);
- at the start of each durable model call, :meth:`TurnCompaction.store_new`
  stores the compactions the loop made since the last call: the step, the
  ``compaction`` message in its place (before the first message it keeps),
  its ``message`` and ``history.compacted`` events, in one transaction.

A summariser that fails or says nothing leaves the conversation as it was;
the loop then goes on uncompacted, or fails the turn with
``reason="context_too_long"`` when the conversation is over the model's
context window.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from turnkit.agent.compaction import Compaction
from turnkit.messages import Message
from turnkit.providers.base import Model, ModelRequest, ModelResponse, Usage
from turnkit.sessions.db.steps import Claim, Journal, PendingWrites, compaction_key
from turnkit.sessions.db.token_reports import latest_report
from turnkit.sessions.runtime.durable import describe_error

if TYPE_CHECKING:
    from turnkit.agent.loop import RunState
    from turnkit.sessions.definitions import AgentDef

__all__ = ["RecordedSummariser", "SummaryFailed", "TurnCompaction"]


class SummaryFailed(Exception):
    """The summariser failed in the recorded run of this turn (replayed as it was)."""


class RecordedSummariser(Model):
    """The compaction's summariser as one turn sees it: recorded, replayed."""

    def __init__(
        self,
        model: Model,
        claim: Claim,
        journal: Journal,
        pending: PendingWrites,
        asking: Callable[[], bool],
    ) -> None:
        self.provider, self.name = model.provider, model.name
        self.context_window = model.context_window
        self._model, self._claim, self._journal = model, claim, journal
        self._pending, self._asking = pending, asking
        self._calls = 0
        self.succeeded: list[int] = []  # the numbers of the calls that gave a summary
        self.fresh: dict[int, dict[str, Any]] = {}  # summaries made now: not stored yet

    async def request(self, request: ModelRequest) -> ModelResponse:
        if self._asking():  # the turn stops at its next model call: nothing to compact for
            raise SummaryFailed("the turn is waiting for an answer")
        number = self._calls
        self._calls += 1
        key = compaction_key(number)
        if self._claim.resumed:
            step = await asyncio.to_thread(self._journal.step, self._claim.turn_id, key)
            if step is not None:
                return self._replayed(number, step.result)
        try:
            response = await self._model.request(request)
        except Exception as err:
            self._pending.steps.append((key, {"error": describe_error(err)}))
            raise
        text = response.text
        if not text.strip():  # summarise() refuses it: recorded as the failure it is
            self._pending.steps.append((key, {"error": f"the summariser {self.id} said nothing"}))
            return response
        self.fresh[number] = {"text": text, "usage": dataclasses.asdict(response.usage)}
        self.succeeded.append(number)
        return response

    def _replayed(self, number: int, result: dict[str, Any]) -> ModelResponse:
        if "error" in result:
            raise SummaryFailed(result["error"])
        self.succeeded.append(number)
        return ModelResponse(Message.assistant(result["text"]), Usage(**result["usage"]))


class TurnCompaction:
    """One turn's compaction: the settings the loop gets, and storing what it made."""

    def __init__(
        self,
        compaction: Compaction,
        model: Model,
        claim: Claim,
        journal: Journal,
        pending: PendingWrites,
        asking: Callable[[], bool],
    ) -> None:
        summariser = compaction.model if isinstance(compaction.model, Model) else model
        self.summariser = RecordedSummariser(summariser, claim, journal, pending, asking)
        self.settings = dataclasses.replace(compaction, model=self.summariser)
        self._claim, self._journal, self._pending = claim, journal, pending
        self._state: RunState | None = None
        self._stored = 0  # how many of the loop's compactions are stored (or were before)

    @classmethod
    def of(
        cls,
        agent: AgentDef,
        claim: Claim,
        journal: Journal,
        pending: PendingWrites,
        asking: Callable[[], bool],
    ) -> TurnCompaction | None:
        """The turn's compaction, or None when ``agent`` has none."""
        if agent.compaction is None:
            return None
        return cls(agent.compaction, agent.model, claim, journal, pending, asking)

    async def watch(self, state: RunState) -> None:
        """Store what the loop compacts in ``state`` (the run of this turn); its
        first estimate starts from the provider's count for the session's
        latest reply (db/token_reports.py), as a ``prompt()`` does."""
        self._state = state
        claim, journal = self._claim, self._journal
        report = await asyncio.to_thread(
            latest_report, journal.store, journal.conversations, claim.session_id, claim.turn_id
        )
        state.compact_from(report)

    async def store_new(self) -> None:
        """Store the compactions made since the last call (each in one transaction)."""
        state = self._state
        made = () if state is None or state.compacting is None else state.compacting.made
        while self._stored < len(made):
            base, message = made[self._stored]
            number = self.summariser.succeeded[self._stored]
            self._stored += 1
            summary = self.summariser.fresh.pop(number, None)
            if summary is None:
                continue  # replayed from its step: stored before the crash
            await asyncio.to_thread(
                self._journal.record_compaction,
                self._claim,
                number,
                summary,
                base,
                message,
                self._pending.take(),
            )
