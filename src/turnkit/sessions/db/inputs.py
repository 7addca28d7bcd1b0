"""Where an accepted input goes: its own turn, held while a question is open, or the answer.

All of it happens inside the transaction that stores the input, with the
session row locked, so an answer racing a held input gets one consistent
outcome, and nothing held is lost or delivered twice, even across a crash.

- No open question: the input gets a queued turn, or, while the session is
  busy, joins the running turn or a queued one as its ``on_busy`` policy
  says (None: its agent's): see :mod:`.busy`.
- A question is open and the input answers it (it comes from a person,
  ``user`` or ``channel``, or names the question with ``answers``): the
  answer's turn is queued with ``answer`` and ``steering`` set. Steering is
  the held inputs in arrival order, up to :data:`MAX_STEERING_ITEMS` items
  and :data:`MAX_STEERING_BYTES` of their text and payload as UTF-8 JSON;
  the rest get ordinary turns after the answer's, in order.
- Otherwise the input is held: it runs no turn of its own.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from turnkit._values import dumps, new_id, now, when
from turnkit.errors import SessionEndedError
from turnkit.sessions.db import approvals, busy
from turnkit.sessions.db import schema as t
from turnkit.sessions.db.prepared import Prepared
from turnkit.sessions.db.store import Store, Tx
from turnkit.sessions.db.turns import queue_turn
from turnkit.sessions.model.events import InputReceived
from turnkit.sessions.model.records import Question, Receipt
from turnkit.sessions.render.ask import answer_value

__all__ = ["MAX_STEERING_BYTES", "MAX_STEERING_ITEMS", "NewInput", "accept", "accept_input"]

MAX_STEERING_ITEMS = 32
MAX_STEERING_BYTES = 64 * 1024
PEOPLE = ("user", "channel")


class NewInput:
    """An input about to be stored (already checked by the caller)."""

    __slots__ = (
        "answers",
        "decisions",
        "describe",
        "details",
        "hops",
        "idempotency_key",
        "on_busy",
        "payload_json",
        "source",
        "text",
    )

    def __init__(
        self,
        source: str,
        text: str | None,
        payload_json: str,
        details: dict[str, Any],
        idempotency_key: str | None = None,
        answers: str | None = None,
        describe: str | None = None,
        hops: int = 0,
        on_busy: str | None = None,
    ) -> None:
        self.source = source
        self.text = text
        self.payload_json = payload_json
        self.details = details  # more AgentInput fields: channel, webhook, schedule, event
        self.idempotency_key = idempotency_key
        self.answers = answers
        self.describe = describe  # the text its input.received event shows, if not its own
        self.hops = hops  # outcomes and sub-agent tasks that led here (AgentInput.hops)
        self.on_busy = on_busy  # "queue" | "steer" | "interrupt" | "merge"; None: the agent's
        self.decisions: Any = None  # app.approve's checked decisions (db.approvals.Decisions)


def accept_input(store: Store, session_id: str, new: NewInput) -> Receipt:
    """Store and route an input in its own transaction; a repeated idempotency key
    gets its first receipt back (``duplicate=True``), also when another process
    stored that key between our check and our insert."""
    try:
        with store.write(urgent=True) as tx:
            return accept(tx, session_id, new)
    except sa.exc.IntegrityError:
        if new.idempotency_key is None:
            raise
        with store.write(urgent=True) as tx:  # the key is stored now: this finds it
            return accept(tx, session_id, new)


def accept(tx: Tx, session_id: str, new: NewInput) -> Receipt:
    """Store ``new`` in ``session_id`` and route it, in ``tx``; its receipt."""
    session = tx.lock_session(session_id)
    if new.idempotency_key is not None:
        first = tx.execute(
            sa.select(
                t.inputs.c.id, t.inputs.c.turn_id, t.inputs.c.held, t.inputs.c.steering_of
            ).where(
                t.inputs.c.session_id == session_id,
                t.inputs.c.idempotency_key == new.idempotency_key,
            )
        ).first()
        if first is not None:
            turn_id, status = busy.receipt_of(tx, session_id, first)
            return Receipt(first.id, turn_id, status, duplicate=True)  # type: ignore[arg-type]
    if session.ended:
        raise SessionEndedError(session_id)
    stored = None if session.question is None else json.loads(session.question)
    if stored is None:
        input_id, agent_input = _insert(tx, session_id, new, held=False)
        policy = new.on_busy or tx.store.on_busy(session.agent)
        turn_id, status = busy.route(tx, session_id, policy, input_id, agent_input)
        _received(tx, session_id, input_id, new, turn_id, held=False)
        return Receipt(input_id, turn_id, status)  # type: ignore[arg-type]
    if new.answers == stored["id"] or (new.answers is None and new.source in PEOPLE):
        return _answer(tx, session_id, new, stored)
    input_id, _ = _insert(tx, session_id, new, held=True)
    _received(tx, session_id, input_id, new, None, held=True)
    return Receipt(input_id, None, "held")


_INSERT_INPUT = Prepared(t.inputs.insert())


def _insert(tx: Tx, session_id: str, new: NewInput, held: bool) -> tuple[str, dict[str, Any]]:
    input_id, received = new_id("in"), now()
    details = {**new.details, "hops": new.hops} if new.hops else new.details
    row = {
        "id": input_id,
        "session_id": session_id,
        "seq": tx.bump(session_id, "input_seq"),
        "source": new.source,
        "text": new.text,
        "payload": new.payload_json,
        "details": dumps(details),
        "idempotency_key": new.idempotency_key,
        "answers": new.answers,
        "received_at": received,
        "held": held,
    }
    tx.execute(_INSERT_INPUT, row)
    agent_input = {
        **details,
        "id": input_id,
        "source": new.source,
        "text": new.text,
        "payload": json.loads(new.payload_json),
        "received_at": when(received).isoformat(),  # type: ignore[union-attr]
    }
    return input_id, agent_input


def _received(
    tx: Tx, session_id: str, input_id: str, new: NewInput, turn_id: str | None, held: bool
) -> None:
    text = new.text if new.describe is None else new.describe
    tx.emit(session_id, InputReceived(input_id, new.source, text, held), turn_id)


def _answer(tx: Tx, session_id: str, new: NewInput, stored: dict[str, Any]) -> Receipt:
    question = Question.from_dict(stored)
    input_id, agent_input = _insert(tx, session_id, new, held=False)
    value = answer_value(question, new.text)
    agent_input["answer"] = {"question_id": question.id, "text": new.text, "value": value}
    held = tx.execute(
        sa.select(t.inputs)
        .where(
            t.inputs.c.session_id == session_id,
            t.inputs.c.held.is_(True),
            t.inputs.c.turn_id.is_(None),
            t.inputs.c.steering_of.is_(None),
        )
        .order_by(t.inputs.c.seq)
    ).all()
    steering, overflow = _split(held)
    agent_input["steering"] = [_held_item(row) for row in steering]
    resume = {"call_id": stored.get("call_id"), "results": stored.get("results", [])}
    resume |= approvals.answer_resume(stored, new, agent_input)  # held tool calls decided
    turn_id = queue_turn(tx, session_id, input_id, agent_input, resume)
    if steering:
        tx.execute(
            t.inputs.update()
            .where(t.inputs.c.id.in_([row.id for row in steering]))
            .values(steering_of=turn_id)
        )
    for row in overflow:
        queue_turn(tx, session_id, row.id, _own_input(row))
    tx.execute(t.sessions.update().where(t.sessions.c.id == session_id).values(question=None))
    _received(tx, session_id, input_id, new, turn_id, held=False)
    approvals.record_decisions(tx, session_id, turn_id, resume, new)
    return Receipt(input_id, turn_id, "queued")


def _size(row: Any) -> int:
    return len(dumps({"text": row.text, "payload": json.loads(row.payload)}).encode("utf-8"))


def _split(rows: list[Any]) -> tuple[list[Any], list[Any]]:
    """Held inputs that fit in the steering bounds, in order, and the rest."""
    total = 0
    for index, row in enumerate(rows):
        total += _size(row)
        if index >= MAX_STEERING_ITEMS or total > MAX_STEERING_BYTES:
            return rows[:index], rows[index:]
    return rows, []


def _held_item(row: Any) -> dict[str, Any]:
    details = json.loads(row.details)
    return {
        "text": row.text,
        "payload": json.loads(row.payload),
        "channel": details.get("channel"),
        "received_at": when(row.received_at).isoformat(),  # type: ignore[union-attr]
        "provider_time": details.get("provider_time"),
        "source": row.source,
        "event": details.get("event"),  # a held outcome keeps what it reports
    }


def _own_input(row: Any) -> dict[str, Any]:
    return {
        **json.loads(row.details),
        "id": row.id,
        "source": row.source,
        "text": row.text,
        "payload": json.loads(row.payload),
        "received_at": when(row.received_at).isoformat(),  # type: ignore[union-attr]
    }
