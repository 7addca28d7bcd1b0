"""The durable record of a running turn: its claim, steps, messages and end.

Each model reply and each tool call is a step recorded under the turn
(``model:<n>``, ``tool:<call id>``); a turn replayed after a crash reads its
steps back instead of calling the model or the tool again. Messages are
keyed by their place in the turn, so a replay never stores one twice. Every
write here goes with its event, in one transaction.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnkit.messages import Message, ToolResultBlock, ToolUseBlock
from turnkit.sessions import schema as t
from turnkit.sessions._db import cut_utf8, dumps, now
from turnkit.sessions.inputs import AgentInput
from turnkit.sessions.present import input_message
from turnkit.sessions.records import Question
from turnkit.sessions.routing import hold_queued
from turnkit.sessions.store import Store, Tx

__all__ = ["HISTORY_CACHE_SESSIONS", "Claim", "Progress", "Step", "TurnLog"]

HISTORY_CACHE_SESSIONS = 256


@dataclass(frozen=True, slots=True)
class Claim:
    """A turn a workflow is running: what it needs to (re)start the loop."""

    turn_id: str
    session_id: str
    agent: str
    input: AgentInput
    history: tuple[Message, ...]  # the conversation up to and including this turn's input
    data: dict[str, Any]
    resumed: bool  # claimed before (a replay after a crash): its steps may be recorded


class Progress:
    """What a running turn has produced and not yet written: written with its next write.

    Batching keeps a turn to a few transactions: a model reply is written
    with the ``tool.started`` of its first call, or with the turn's end.
    """

    __slots__ = ("messages", "steps")

    def __init__(self) -> None:
        self.steps: list[tuple[str, Any]] = []  # (key, result)
        self.messages: list[tuple[int, Message]] = []  # (index in the turn, message)

    def take(self) -> Progress:
        """The buffered writes, leaving this buffer empty."""
        taken = Progress()
        taken.steps, self.steps = self.steps, []
        taken.messages, self.messages = self.messages, []
        return taken


@dataclass(frozen=True, slots=True)
class Step:
    status: str  # "started" | "done"
    result: Any


class TurnLog:
    """Writes and reads the record of turns, on a :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._history: dict[str, tuple[int, tuple[tuple[str, Message], ...]]] = {}
        self._history_lock = threading.Lock()

    def claim(self, session_id: str, workflow_id: str) -> Claim | None:
        """The turn ``workflow_id`` is to run, or None when there is none.

        In order: the turn it claimed before (a recovery); a turn of the
        session left running by another workflow (the queue runs one
        workflow per session at a time, so that one is not running: it was
        recovered and re-queued after a crash; this one adopts the turn, and
        the other will claim the next); else the lowest queued turn.
        """
        with self.store.write() as tx:
            row = tx.execute(sa.select(t.turns).where(t.turns.c.workflow_id == workflow_id)).first()
            if row is not None:
                return self._claim(tx, row, True) if row.status == "running" else None
            row = tx.execute(
                sa.select(t.turns)
                .where(t.turns.c.session_id == session_id, t.turns.c.status == "running")
                .order_by(t.turns.c.seq)
                .limit(1)
            ).first()
            if row is not None:
                tx.execute(
                    t.turns.update().where(t.turns.c.id == row.id).values(workflow_id=workflow_id)
                )
                return self._claim(tx, row, True)
            row = tx.execute(
                sa.select(t.turns)
                .where(t.turns.c.session_id == session_id, t.turns.c.status == "queued")
                .order_by(t.turns.c.seq)
                .limit(1)
            ).first()
            if row is None:
                return None
            self._start(tx, row, workflow_id)
            return self._claim(tx, row, False)

    def _start(self, tx: Tx, row: Any, workflow_id: str) -> None:
        tx.execute(
            t.turns.update()
            .where(t.turns.c.id == row.id)
            .values(status="running", workflow_id=workflow_id, started_at=now())
        )
        tx.emit(row.session_id, "turn.started", {"input": json.loads(row.input)}, row.id)
        resume = None if row.resume is None else json.loads(row.resume)
        message = input_message(AgentInput.from_dict(json.loads(row.input)), row.id, resume)
        self._add_message(tx, row.session_id, row.id, 0, message)

    def _claim(self, tx: Tx, row: Any, resumed: bool) -> Claim:
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

    def write(self, session_id: str, turn_id: str, progress: Progress) -> None:
        with self.store.write() as tx:
            self._write(tx, session_id, turn_id, progress)

    def _write(self, tx: Tx, session_id: str, turn_id: str, progress: Progress) -> None:
        for key, result in progress.steps:
            done = tx.execute(
                sa.select(t.steps.c.key).where(t.steps.c.turn_id == turn_id, t.steps.c.key == key)
            ).first()
            if done is None:
                values = {"turn_id": turn_id, "key": key, "status": "done"}
                tx.execute(t.steps.insert().values(**values, result=dumps(result)))
        for index, message in progress.messages:
            self._add_message(tx, session_id, turn_id, index, message)

    def start_tool(
        self, session_id: str, turn_id: str, call: ToolUseBlock, progress: Progress
    ) -> None:
        with self.store.write() as tx:
            self._write(tx, session_id, turn_id, progress)
            tx.execute(
                t.steps.insert().values(turn_id=turn_id, key=f"tool:{call.id}", status="started")
            )
            tx.emit(session_id, "tool.started", {"id": call.id, "name": call.name}, turn_id)

    def finish_tool(
        self, session_id: str, turn_id: str, call: ToolUseBlock, block: ToolResultBlock
    ) -> None:
        with self.store.write() as tx:
            done = t.steps.update().where(
                t.steps.c.turn_id == turn_id,
                t.steps.c.key == f"tool:{call.id}",
                t.steps.c.status == "started",
            )
            updated = tx.execute(done.values(status="done", result=dumps(block.to_dict())))
            if updated.rowcount:
                data = {"id": call.id, "name": call.name, "is_error": block.is_error}
                tx.emit(session_id, "tool.finished", data, turn_id)

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
        tx.emit(session_id, "message", {"message": wire}, turn_id)

    def finish(
        self,
        claim: Claim,
        status: str,
        *,
        output: str | None = None,
        error: str | None = None,
        reason: str | None = None,
        data: dict[str, Any] | None = None,
        usage: dict[str, int] | None = None,
        progress: Progress | None = None,
        output_data: Any = None,
    ) -> bool:
        """End the turn (once: False when it had already ended)."""
        with self.store.write() as tx:
            if not _still_active(tx, claim.turn_id):
                return False
            if progress is not None:
                self._write(tx, claim.session_id, claim.turn_id, progress)
            if data is not None:
                tx.execute(
                    t.sessions.update()
                    .where(t.sessions.c.id == claim.session_id)
                    .values(data=dumps(data))
                )
            if error is not None:
                error, _ = cut_utf8(error, 4096)
            self.store.end_turn(
                tx,
                claim.session_id,
                claim.turn_id,
                status,
                output=output,
                error=error,
                reason=reason,
                usage=usage,
                output_data=output_data,
            )
            return True

    def finish_asking(
        self,
        claim: Claim,
        question: Question,
        call_id: str | None,
        pending: list[ToolResultBlock],
        data: dict[str, Any],
        progress: Progress,
    ) -> bool:
        """End the turn as asking ``question``: the session waits for its answer."""
        with self.store.write() as tx:
            if not _still_active(tx, claim.turn_id):
                return False
            self._write(tx, claim.session_id, claim.turn_id, progress)
            stored = {
                **question.to_dict(),
                "call_id": call_id,
                "results": [block.to_dict() for block in pending],
            }
            tx.execute(
                t.sessions.update()
                .where(t.sessions.c.id == claim.session_id)
                .values(question=dumps(stored), data=dumps(data))
            )
            tx.execute(
                t.turns.update()
                .where(t.turns.c.id == claim.turn_id)
                .values(question=dumps(question.to_dict()))
            )
            asked = {
                "question_id": question.id,
                "question": question.text,
                "options": [{"label": o.label, "value": o.value} for o in question.options],
            }
            tx.emit(claim.session_id, "question.asked", asked, claim.turn_id)
            hold_queued(self.store, tx, claim.session_id)
            self.store.end_turn(
                tx, claim.session_id, claim.turn_id, "completed", output=question.text
            )
            return True


def _still_active(tx: Tx, turn_id: str) -> bool:
    """Whether the turn has not ended yet (ending twice is a no-op)."""
    status = tx.execute(sa.select(t.turns.c.status).where(t.turns.c.id == turn_id)).scalar()
    return status in ("queued", "running")
