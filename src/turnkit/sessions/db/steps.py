"""The durable record of a running turn: its claim, steps, messages and end.

Each model reply and each tool call is a step recorded under the turn
(``model:<n>``, ``tool:<call id>``); a turn replayed after a crash reads its
steps back instead of calling the model or the tool again. Messages are
keyed by their place in the turn, so a replay never stores one twice. Every
write here goes with its event, in one transaction; status changes go
through :mod:`.turns`.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnkit.messages import Message, ToolResultBlock, ToolUseBlock
from turnkit.sessions._values import dumps
from turnkit.sessions.db import schema as t
from turnkit.sessions.db import turns
from turnkit.sessions.db.store import Store, Tx
from turnkit.sessions.model.events import MessageAdded, ToolFinished, ToolStarted
from turnkit.sessions.model.inputs import AgentInput
from turnkit.sessions.model.records import Question
from turnkit.sessions.model.status import TurnState
from turnkit.sessions.render.present import input_message

__all__ = [
    "HISTORY_CACHE_SESSIONS",
    "Claim",
    "Journal",
    "PendingWrites",
    "Step",
    "tool_step_key",
]

HISTORY_CACHE_SESSIONS = 256
_KEY_LIMIT = 300  # the steps table's key column


def tool_step_key(call_id: str) -> str:
    """The step key of a tool call: ``tool:<id>``, or a digest of an id too long for
    the column (providers bound their ids; a model's own need not be)."""
    key = f"tool:{call_id}"
    if len(key) <= _KEY_LIMIT and "\x00" not in call_id:
        return key
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"tool#{digest}"


@dataclass(frozen=True, slots=True)
class Claim:
    """A turn a runner is running: what it needs to (re)start the agent loop."""

    turn_id: str
    session_id: str
    agent: str
    input: AgentInput
    history: tuple[Message, ...]  # the conversation up to and including this turn's input
    data: dict[str, Any]
    resumed: bool  # claimed before (a replay after a crash): its steps may be recorded
    runner_id: str  # the session's runner running it


class PendingWrites:
    """What a running turn has produced and not yet written: written with its next write.

    Batching keeps a turn to a few transactions: a model reply is written
    with the ``tool.started`` of its first call, or with the turn's end.
    """

    __slots__ = ("messages", "steps")

    def __init__(self) -> None:
        self.steps: list[tuple[str, Any]] = []  # (key, result)
        self.messages: list[tuple[int, Message]] = []  # (index in the turn, message)

    def take(self) -> PendingWrites:
        """The buffered writes, leaving this buffer empty."""
        taken = PendingWrites()
        taken.steps, self.steps = self.steps, []
        taken.messages, self.messages = self.messages, []
        return taken


@dataclass(frozen=True, slots=True)
class Step:
    status: str  # "started" | "done"
    result: Any


@dataclass(frozen=True, slots=True)
class Ending:
    """How a turn ends (what :meth:`Journal.finish` writes)."""

    status: TurnState
    output: str | None = None
    error: str | None = None
    reason: str | None = None
    usage: dict[str, int] | None = None
    output_data_json: str | None = None
    data_json: str | None = None  # the session data to save, if any


class Journal:
    """Writes and reads the record of turns, on a :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._history: dict[str, tuple[int, tuple[tuple[str, Message], ...]]] = {}
        self._history_lock = threading.Lock()

    def claim(self, session_id: str, runner_id: str) -> Claim | None:
        """The turn runner ``runner_id`` is to run next (see :func:`.turns.claim_next`)."""
        with self.store.write() as tx:
            return self._claim_next(tx, session_id, runner_id)

    def _claim_next(self, tx: Tx, session_id: str, runner_id: str) -> Claim | None:
        claimed = turns.claim_next(tx, session_id, runner_id)
        if claimed is None:
            return None
        row = claimed.row
        if not claimed.resumed:
            resume = None if row.resume is None else json.loads(row.resume)
            message = input_message(AgentInput.from_dict(json.loads(row.input)), row.id, resume)
            self._add_message(tx, session_id, row.id, 0, message)
        return self._claim(tx, row, claimed.resumed, runner_id)

    def _claim(self, tx: Tx, row: Any, resumed: bool, runner_id: str) -> Claim:
        session = tx.execute(
            sa.select(t.sessions.c.agent, t.sessions.c.data).where(
                t.sessions.c.id == row.session_id
            )
        ).one()
        stored = self._messages(tx, row.session_id)
        # The loop replays this turn's own replies from its steps: start before them.
        own = [m for turn_id, m in stored if turn_id == row.id]
        history = [m for turn_id, m in stored if turn_id != row.id] + own[:1]
        return Claim(
            row.id,
            row.session_id,
            session.agent,
            AgentInput.from_dict(json.loads(row.input)),
            tuple(history),
            json.loads(session.data),
            resumed,
            runner_id,
        )

    def _messages(self, tx: Tx, session_id: str) -> tuple[tuple[str, Message], ...]:
        """The session's stored messages with their turn ids, oldest first.

        Stored messages never change, so what was read before is kept (for
        the sessions used last) and only newer positions are read: a turn of
        a long session does not re-read and re-validate its whole history.
        """
        cache = self._history
        with self._history_lock:
            known = cache.pop(session_id, (0, ()))
        position, messages = known
        rows = tx.execute(
            sa.select(t.messages.c.position, t.messages.c.message, t.messages.c.turn_id)
            .where(t.messages.c.session_id == session_id, t.messages.c.position > position)
            .order_by(t.messages.c.position)
        ).all()
        if rows:
            fresh = tuple((r.turn_id, Message.from_dict(json.loads(r.message))) for r in rows)
            position, messages = rows[-1].position, messages + fresh
        with self._history_lock:
            cache[session_id] = (position, messages)  # last used goes last
            while len(cache) > HISTORY_CACHE_SESSIONS:
                cache.pop(next(iter(cache)))
        return messages

    # -- steps ---------------------------------------------------------------

    def step(self, turn_id: str, key: str) -> Step | None:
        with self.store.read() as conn:
            row = conn.execute(
                sa.select(t.steps.c.status, t.steps.c.result).where(
                    t.steps.c.turn_id == turn_id, t.steps.c.key == key
                )
            ).first()
        if row is None:
            return None
        return Step(row.status, None if row.result is None else json.loads(row.result))

    def _write(self, tx: Tx, session_id: str, turn_id: str, pending: PendingWrites) -> None:
        for key, result in pending.steps:
            done = tx.execute(
                sa.select(t.steps.c.key).where(t.steps.c.turn_id == turn_id, t.steps.c.key == key)
            ).first()
            if done is None:
                values = {"turn_id": turn_id, "key": key, "status": "done"}
                tx.execute(t.steps.insert().values(**values, result=dumps(result)))
        for index, message in pending.messages:
            self._add_message(tx, session_id, turn_id, index, message)

    def start_tool(
        self, session_id: str, turn_id: str, call: ToolUseBlock, pending: PendingWrites
    ) -> None:
        with self.store.write() as tx:
            self._write(tx, session_id, turn_id, pending)
            tx.execute(
                t.steps.insert().values(
                    turn_id=turn_id, key=tool_step_key(call.id), status="started"
                )
            )
            tx.emit(session_id, ToolStarted(call.id, call.name), turn_id)

    def finish_tool(
        self, session_id: str, turn_id: str, call: ToolUseBlock, block: ToolResultBlock
    ) -> None:
        with self.store.write() as tx:
            done = t.steps.update().where(
                t.steps.c.turn_id == turn_id,
                t.steps.c.key == tool_step_key(call.id),
                t.steps.c.status == "started",
            )
            updated = tx.execute(done.values(status="done", result=dumps(block.to_dict())))
            if updated.rowcount:
                tx.emit(session_id, ToolFinished(call.id, call.name, block.is_error), turn_id)

    # -- messages and the end ------------------------------------------------

    def _add_message(
        self, tx: Tx, session_id: str, turn_id: str, index: int, message: Message
    ) -> None:
        exists = tx.execute(
            sa.select(t.messages.c.position).where(
                t.messages.c.turn_id == turn_id, t.messages.c.turn_index == index
            )
        ).first()
        if exists is not None:
            return
        wire = message.to_dict()
        tx.execute(
            t.messages.insert().values(
                session_id=session_id,
                position=tx.bump(session_id, "message_seq"),
                turn_id=turn_id,
                turn_index=index,
                message=dumps(wire),
            )
        )
        tx.emit(session_id, MessageAdded(wire), turn_id)

    def finish(
        self,
        claim: Claim,
        ending: Ending,
        pending: PendingWrites | None = None,
        claim_next: bool = True,
    ) -> Claim | None:
        """End the turn with what it produced (once), and claim the runner's next turn
        in the same transaction: that claim, or None when the runner is done (or
        ``claim_next`` is False: a last-resort end that writes nothing else)."""
        with self.store.write() as tx:
            if _still_running(tx, claim):
                if pending is not None:
                    self._write(tx, claim.session_id, claim.turn_id, pending)
                if ending.data_json is not None:
                    statement = t.sessions.update().where(t.sessions.c.id == claim.session_id)
                    tx.execute(statement.values(data=ending.data_json))
                turns.end_turn(
                    tx,
                    claim.session_id,
                    claim.turn_id,
                    ending.status,
                    output=ending.output,
                    error=ending.error,
                    reason=ending.reason,
                    usage=ending.usage,
                    output_data_json=ending.output_data_json,
                )
            if not claim_next:
                return None
            return self._claim_next(tx, claim.session_id, claim.runner_id)

    def finish_asking(
        self,
        claim: Claim,
        question: Question,
        resume: dict[str, Any],
        data_json: str,
        pending: PendingWrites,
    ) -> Claim | None:
        """End the turn as asking ``question`` (see :func:`.turns.end_asking`); the
        runner's next claim, as :meth:`finish`."""
        with self.store.write() as tx:
            if _still_running(tx, claim):
                self._write(tx, claim.session_id, claim.turn_id, pending)
                turns.end_asking(tx, claim.session_id, claim.turn_id, question, resume, data_json)
            return self._claim_next(tx, claim.session_id, claim.runner_id)


def _still_running(tx: Tx, claim: Claim) -> bool:
    """Lock the session (every writer of its turns does so first), then look at the turn."""
    tx.lock_session(claim.session_id)
    status = tx.execute(sa.select(t.turns.c.status).where(t.turns.c.id == claim.turn_id))
    return status.scalar() == TurnState.RUNNING
