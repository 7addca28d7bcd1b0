"""Event subscriptions: another session's turn outcomes, delivered as inputs.

A subscriber watches one session (``to_session``) or every session of an
agent (``to_agent``). Each terminal turn there becomes exactly one input of
the subscriber (``source="event"``, no text, ``event`` filled), written in
the transaction that ends the turn (:class:`SubscriptionFanOut` is a turn-end
listener), with the terminal event's id as its idempotency key: none lost,
none duplicated, also across kill -9. The input is routed like any other:
queued in order while the subscriber is busy, held while it waits on a
question. A session is never told of its own turns.

Chains are bounded: an outcome's inputs count one hop more than the input
of the turn that produced it (``AgentInput.hops``, stored with the input,
so the count holds across processes and restarts). Past the App's
``max_hops`` no input is created, and the ending session records an
``input.refused`` event instead: two sessions subscribed to each other stop
after ``max_hops`` turns, not never.
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

from turnkit._values import now
from turnkit.errors import SessionEndedError
from turnkit.sessions.db.inputs import NewInput, accept
from turnkit.sessions.db.store import TurnEnded, Tx
from turnkit.sessions.db.subscriptions import subscribe, subscribers_of, unsubscribe
from turnkit.sessions.db.turns import input_hops
from turnkit.sessions.model.events import InputRefused
from turnkit.sessions.model.inputs import EventInfo, EventResult
from turnkit.sessions.render.present import describe_event

__all__ = ["SubscriptionFanOut", "subscribe", "unsubscribe"]


class SubscriptionFanOut:
    """In the ending turn's transaction: one input per subscriber of the outcome."""

    def __init__(self, max_hops: int) -> None:
        self.max_hops = max_hops

    def turn_ended(self, tx: Tx, ended: TurnEnded) -> None:
        subscribers = subscribers_of(tx, ended.session_id, ended.agent)
        if not subscribers:
            return
        hops = input_hops(tx, ended.turn_id) + 1
        if hops > self.max_hops:
            refused = InputRefused("event", sorted(subscribers), hops, self.max_hops)
            tx.emit(ended.session_id, refused, ended.turn_id)
            return
        event = _event_info(ended)
        for subscriber_id in subscribers:
            new = NewInput(
                "event",
                None,
                "null",
                {"event": event.to_dict()},
                idempotency_key=f"event:{event.id}",
                describe=describe_event(event),
                hops=hops,
            )
            with contextlib.suppress(SessionEndedError):  # an ended subscriber takes no more
                accept(tx, subscriber_id, new)


def _event_info(ended: TurnEnded) -> EventInfo:
    result = ended.result
    return EventInfo(
        id=ended.event_id,
        type=f"turn.{ended.status.value}",
        session_id=ended.session_id,
        turn_id=ended.turn_id,
        agent_id=ended.agent,
        occurred_at=datetime.fromtimestamp(now(), UTC),
        reason=ended.reason,
        error=ended.error,  # already cut to 4 KiB with the turn's end
        result=None if result is None else EventResult(result["text"], result["truncated"]),
    )
