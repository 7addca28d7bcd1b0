"""Input while busy: where an input goes when its session has work going on.

Decided in the transaction that accepts the input, with the session row
locked (:func:`turnkit.sessions.db.inputs.accept` calls :func:`route`), so an
input racing a turn's end gets one outcome, on SQLite as on Postgres. A
question that is open comes first: every input is then held or answers it,
whatever its policy.

- ``queue``: its own turn, after the ones before it.
- ``steer`` (a turn is running and not asked to stop): the input joins it.
  It still gets a queued turn of its own, its *fallback*, in arrival order,
  and its row names the running turn (``steering_of``). Before each model
  call the running turn takes what was steered into it
  (:func:`take_steered`): the fallbacks are folded (cancelled, reason
  ``"steered"``, with no event, as nobody was told of them) and the model
  reads the inputs, in one transaction with the step that records it. A
  turn that ends without another model call leaves them queued: they run
  next, each as its own turn. Either way, once.
- ``interrupt`` (a turn is running): the running turn is asked to stop
  (reason ``"interrupted"``: in this process at once, elsewhere through the
  database, as ``cancel`` does) and the input gets its own turn.
- ``merge``: the input joins the session's newest queued turn, if that one
  is an ordinary turn (not an answer's, not a fallback) with room left
  (:data:`MAX_MERGED_ITEMS`, :data:`MAX_MERGED_BYTES`); that turn's input
  keeps it in ``merged``. Else it gets its own turn, which later ones join.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from turnkit._values import dumps
from turnkit.messages import Message
from turnkit.sessions.db import schema as t
from turnkit.sessions.db.store import Tx
from turnkit.sessions.db.turns import fold_queued, queue_turn, request_cancel
from turnkit.sessions.model.events import InputReceived, InputSteered
from turnkit.sessions.model.inputs import AgentInput
from turnkit.sessions.model.status import TurnState

__all__ = [
    "INTERRUPTED",
    "MAX_MERGED_BYTES",
    "MAX_MERGED_ITEMS",
    "STEERED",
    "has_steered",
    "receipt_of",
    "route",
    "take_steered",
]

MAX_MERGED_ITEMS = 32
MAX_MERGED_BYTES = 64 * 1024  # the merged inputs' text and payload, as UTF-8 JSON
INTERRUPTED = "interrupted"  # the reason of a turn an input interrupted
STEERED = "steered"  # the reason of a fallback folded into the running turn


def route(
    tx: Tx, session_id: str, policy: str, input_id: str, agent_input: dict[str, Any]
) -> tuple[str, str]:
    """Route a stored input (no question is open): its receipt's turn id and status."""
    if policy == "merge":
        joined = _merge(tx, session_id, input_id, agent_input)
        if joined is not None:
            return joined, "merged"
    elif policy == "steer":
        running = _running(tx, session_id, asked_to_stop=False)
        if running is not None:
            queue_turn(tx, session_id, input_id, agent_input)  # the fallback
            statement = t.inputs.update().where(t.inputs.c.id == input_id)
            tx.execute(statement.values(steering_of=running))
            return running, "steered"
    elif policy == "interrupt":
        running = _running(tx, session_id, asked_to_stop=None)
        if running is not None and request_cancel(tx, running, INTERRUPTED):
            cancel = tx.store.cancel_local
            if cancel is not None:  # this process's own turn stops after the commit
                tx.after_commit(lambda: cancel(running, INTERRUPTED))
            tx.appended.add(session_id)  # other processes look at their turns
    return queue_turn(tx, session_id, input_id, agent_input), "queued"


def _running(tx: Tx, session_id: str, asked_to_stop: bool | None) -> str | None:
    """The session's running turn (``asked_to_stop=False``: only one not asked to stop)."""
    query = sa.select(t.turns.c.id).where(
        t.turns.c.session_id == session_id, t.turns.c.status == TurnState.RUNNING
    )
    if asked_to_stop is False:
        query = query.where(t.turns.c.cancel_reason.is_(None))
    return tx.execute(query.order_by(t.turns.c.seq).limit(1)).scalar()


# -- merge ---------------------------------------------------------------------


def _merge(tx: Tx, session_id: str, input_id: str, agent_input: dict[str, Any]) -> str | None:
    """Join the session's newest queued turn if it takes one more; its id, or None."""
    newest = tx.execute(
        sa.select(t.turns.c.id, t.turns.c.input, t.turns.c.resume, t.inputs.c.steering_of)
        .join(t.inputs, t.inputs.c.id == t.turns.c.input_id)
        .where(t.turns.c.session_id == session_id, t.turns.c.status == TurnState.QUEUED)
        .order_by(t.turns.c.seq.desc())
        .limit(1)
    ).first()
    if newest is None or newest.resume is not None or newest.steering_of is not None:
        return None  # nothing queued, an answer's turn, or a steered input's fallback
    first = json.loads(newest.input)
    merged = [*(first.get("merged") or ()), merged_item(agent_input)]
    size = sum(_size(item) for item in merged)
    if len(merged) > MAX_MERGED_ITEMS or size > MAX_MERGED_BYTES:
        return None
    first["merged"] = merged
    statement = t.turns.update().where(
        t.turns.c.id == newest.id, t.turns.c.status == TurnState.QUEUED
    )
    tx.execute(statement.values(input=dumps(first)))
    tx.execute(t.inputs.update().where(t.inputs.c.id == input_id).values(turn_id=newest.id))
    return newest.id


def merged_item(agent_input: dict[str, Any]) -> dict[str, Any]:
    """An input as one of a turn's ``merged`` (a ``HeldInput``'s JSON)."""
    return {
        "text": agent_input.get("text"),
        "payload": agent_input.get("payload"),
        "channel": agent_input.get("channel"),
        "received_at": agent_input["received_at"],
        "provider_time": agent_input.get("provider_time"),
        "source": agent_input["source"],
        "event": agent_input.get("event"),
    }


def _size(item: dict[str, Any]) -> int:
    return len(dumps({"text": item["text"], "payload": item["payload"]}).encode("utf-8"))


# -- steer: what the running turn takes before a model call ----------------------


def _steered(turn_id: str) -> Any:
    """The inputs steered into ``turn_id`` whose fallback is still queued, in order."""
    return (
        sa.select(t.inputs.c.id, t.turns.c.id.label("fallback"), t.turns.c.input)
        .join(t.turns, t.turns.c.id == t.inputs.c.turn_id)
        .where(t.inputs.c.steering_of == turn_id, t.turns.c.status == TurnState.QUEUED)
        .order_by(t.inputs.c.seq)
    )


def has_steered(conn: sa.Connection, turn_id: str) -> bool:
    """Whether inputs wait to join the running turn ``turn_id`` (a cheap read)."""
    return conn.execute(_steered(turn_id).limit(1)).first() is not None


def take_steered(tx: Tx, session_id: str, turn_id: str) -> list[tuple[str, AgentInput]]:
    """Take what was steered into ``turn_id`` (the session row is locked): each
    fallback is folded and an ``input.steered`` event says so; the inputs, in order."""
    taken = []
    for row in tx.execute(_steered(turn_id)).all():
        if fold_queued(tx, row.fallback, STEERED):
            tx.emit(session_id, InputSteered(row.id, turn_id), turn_id)
            taken.append((row.id, AgentInput.from_dict(json.loads(row.input))))
    return taken


def steering_step(message: Message, input_ids: list[str]) -> dict[str, Any]:
    """What the step of a delivery records (a replay reads the message back)."""
    return {"message": message.to_dict(), "inputs": input_ids}


# -- receipts ------------------------------------------------------------------


def receipt_of(tx: Tx, session_id: str, row: Any) -> tuple[str | None, str]:
    """The turn id and status an input's receipt gave (for a repeated key)."""
    if row.held:  # held now; maybe not when it came (a question was asked after it)
        return _receipt_when_held(tx, session_id, row.id)
    if row.steering_of is not None:
        return row.steering_of, "steered"
    if row.turn_id is None:
        return None, "held"
    owner = tx.execute(sa.select(t.turns.c.input_id).where(t.turns.c.id == row.turn_id))
    return row.turn_id, ("queued" if owner.scalar() == row.id else "merged")


def _receipt_when_held(tx: Tx, session_id: str, input_id: str) -> tuple[str | None, str]:
    """The receipt of an input that is held now, from its ``input.received`` event
    (whose turn id is the receipt's): held, or, if a question came after it,
    queued (that turn was its own), steered (it had a fallback turn of its own
    besides) or merged (it had no turn of its own)."""
    found = tx.execute(
        sa.select(t.events.c.turn_id, t.events.c.data).where(
            t.events.c.session_id == session_id,
            t.events.c.type == InputReceived.type,
            t.events.c.data.contains(input_id, autoescape=True),
        )
    ).all()
    turn_id = next(r.turn_id for r in found if json.loads(r.data)["input_id"] == input_id)
    if turn_id is None:
        return None, "held"
    own_turns = set(
        tx.execute(
            sa.select(t.turns.c.id).where(
                t.turns.c.session_id == session_id, t.turns.c.input_id == input_id
            )
        ).scalars()
    )
    if turn_id in own_turns:
        return turn_id, "queued"
    return turn_id, ("steered" if own_turns else "merged")
