"""The durable record of a running turn: its claim, steps, messages and end.

Each model reply and each tool call is a step recorded under the turn
(``model:<n>``, ``tool:<call id>``); a turn replayed after a crash reads its
steps back instead of calling the model or the tool again. Messages are
keyed by their place in the turn, so a replay never stores one twice. Every
write here goes with its event, in one transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnkit.messages import Message, ToolResultBlock, ToolUseBlock
from turnkit.sessions import schema as t
from turnkit.sessions._db import dumps, now
from turnkit.sessions.inputs import AgentInput
from turnkit.sessions.present import input_message
from turnkit.sessions.records import Question
from turnkit.sessions.store import Store, Tx, cut_utf8

__all__ = ["Claim", "Step", "TurnLog"]


@dataclass(frozen=True, slots=True)
class Claim:
    """A turn a workflow is running: what it needs to (re)start the loop."""

    turn_id: str
    session_id: str
    agent: str
    input: AgentInput
    history: tuple[Message, ...]  # the conversation up to and including this turn's input
    data: dict[str, Any]
    stored: int  # messages this turn has stored so far, its input included


@dataclass(frozen=True, slots=True)
class Step:
    status: str  # "started" | "done"
    result: Any


class TurnLog:
    """Writes and reads the record of turns, on a :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def claim(self, session_id: str, workflow_id: str) -> Claim | None:
        """The turn ``workflow_id`` runs: the one it claimed before, else the
        session's lowest queued turn, claimed now. None when there is none."""
        with self.store.write() as tx:
            row = tx.execute(sa.select(t.turns).where(t.turns.c.workflow_id == workflow_id)).first()
            if row is not None:
                if row.status != "running":
                    return None
            else:
                row = tx.execute(
                    sa.select(t.turns)
                    .where(t.turns.c.session_id == session_id, t.turns.c.status == "queued")
                    .order_by(t.turns.c.seq)
                    .limit(1)
                ).first()
                if row is None:
                    return None
                self._start(tx, row, workflow_id)
            return self._claim(tx, row)

    def _start(self, tx: Tx, row: Any, workflow_id: str) -> None:
        tx.execute(
            t.turns.update()
            .where(t.turns.c.id == row.id)
            .values(status="running", workflow_id=workflow_id, started_at=now())
        )
        tx.emit(row.session_id, "turn.started", {"input": json.loads(row.input)}, row.id)
        message = input_message(AgentInput.from_dict(json.loads(row.input)), row.id)
        self._add_message(tx, row.session_id, row.id, 0, message)

    def _claim(self, tx: Tx, row: Any) -> Claim:
        session = tx.execute(
            sa.select(t.sessions.c.agent, t.sessions.c.data).where(
                t.sessions.c.id == row.session_id
            )
        ).one()
        stored = tx.execute(
            sa.select(t.messages.c.message, t.messages.c.turn_id)
            .where(t.messages.c.session_id == row.session_id)
            .order_by(t.messages.c.position)
        ).all()
        # The loop replays this turn's own replies from its steps: start before them.
        own = [m for m in stored if m.turn_id == row.id]
        history = [m for m in stored if m.turn_id != row.id] + own[:1]
        return Claim(
            row.id,
            row.session_id,
            session.agent,
            AgentInput.from_dict(json.loads(row.input)),
            tuple(Message.from_dict(json.loads(m.message)) for m in history),
            json.loads(session.data),
            len(own),
        )

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

    def record_step(self, turn_id: str, key: str, result: Any) -> None:
        """A step that finished with no event of its own (a model reply)."""
        with self.store.write() as tx:
            tx.execute(
                t.steps.insert().values(
                    turn_id=turn_id, key=key, status="done", result=dumps(result)
                )
            )

    def start_tool(self, session_id: str, turn_id: str, call: ToolUseBlock) -> None:
        with self.store.write() as tx:
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

    def add_message(self, session_id: str, turn_id: str, index: int, message: Message) -> None:
        with self.store.write() as tx:
            self._add_message(tx, session_id, turn_id, index, message)

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
    ) -> bool:
        """End the turn (once: False when it had already ended)."""
        with self.store.write() as tx:
            row = tx.execute(
                sa.select(t.turns.c.status).where(t.turns.c.id == claim.turn_id)
            ).first()
            if row is None or row.status not in ("queued", "running"):
                return False
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
            )
            return True

    def finish_asking(
        self,
        claim: Claim,
        question: Question,
        call_id: str | None,
        pending: list[ToolResultBlock],
        data: dict[str, Any],
    ) -> bool:
        """End the turn as asking ``question``: the session waits for its answer."""
        with self.store.write() as tx:
            row = tx.execute(
                sa.select(t.turns.c.status).where(t.turns.c.id == claim.turn_id)
            ).first()
            if row is None or row.status not in ("queued", "running"):
                return False
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
            self.store.end_turn(
                tx, claim.session_id, claim.turn_id, "completed", output=question.text
            )
            return True
