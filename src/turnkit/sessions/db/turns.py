"""A turn's life: every change of a turn's status is one function here.

::

    input accepted ──► queued ──claim──► running ──► completed   (the reply, or a question)
                         │                  │  └───► failed      (reason + error)
                         │                  └──────► cancelled   (cancel, end, interrupt)
                         ├──question asked──► cancelled (reason "held": its input is held)
                         ├──steered in──────► cancelled (reason "steered": the running turn read it)
                         └──session ended───► cancelled (reason "session_ended")

Each transition is an ``UPDATE ... WHERE id = :id AND status IN (...)``
whose row count says whether it applied, so two writers racing on one turn
(an ``end_session`` and a claim, a cancel and the turn's own end) get one
outcome: the loser changes nothing and emits nothing. Every transition runs
in a transaction that has locked the session's row first, so the runner,
the queue and the turns of one session change together.

Why DBOS is used as it is: a session's turns run one at a time in one DBOS
workflow, its *runner* (``turnkit_sessions.runner``), which claims the
session's next queued turn until none is left, then gives the session up in
the same transaction that finds it empty. An input that queues a turn for a
session without a runner names a new runner in its own transaction, and the
dispatcher starts that workflow at once after the commit (or enqueues it on
DBOS's queue when this process is full or runs no turns): no poll between
an input and its turn. DBOS makes the runner durable (a crashed runner is
recovered and resumes the turn it had claimed); turnkit's own tables keep
the order, the steps and the events, written with each transition.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from turnkit._values import cut_utf8, dumps, new_id, now, storable
from turnkit.sessions.db import schema as t
from turnkit.sessions.db.prepared import Prepared
from turnkit.sessions.db.store import TurnEnded, Tx, queued_key
from turnkit.sessions.model.events import (
    QuestionAsked,
    TurnCancelled,
    TurnCompleted,
    TurnFailed,
    TurnStarted,
)
from turnkit.sessions.model.records import Question
from turnkit.sessions.model.status import ACTIVE, TurnState

__all__ = [
    "MAX_ERROR_BYTES",
    "MAX_RESULT_BYTES",
    "Claimed",
    "cancel_queued",
    "claim_next",
    "end_asking",
    "end_session",
    "end_turn",
    "fold_queued",
    "hold_queued",
    "input_hops",
    "queue_turn",
    "request_cancel",
    "running",
]

MAX_RESULT_BYTES = 16 * 1024  # of a completed turn's text in its event and its outcome
MAX_ERROR_BYTES = 4 * 1024

_QUEUED = (TurnState.QUEUED,)
_RUNNING = (TurnState.RUNNING,)


@dataclass(frozen=True, slots=True)
class Claimed:
    """The turn a runner is to run now; ``resumed`` when it was running before (a crash)."""

    row: Any
    resumed: bool
    session: Any  # the session's row, locked by the claim


# Each transition's statement is built once per (from statuses, columns set).
_TRANSITIONS: dict[tuple[tuple[TurnState, ...], tuple[str, ...]], Any] = {}
_SESSION_AGENT = Prepared(
    sa.select(t.sessions.c.agent).where(t.sessions.c.id == sa.bindparam("sid"))
)


def _transition(
    tx: Tx, turn_id: str, to: TurnState, from_: tuple[TurnState, ...], **values: Any
) -> bool:
    """Move ``turn_id`` to ``to`` if its status is one of ``from_``; whether it moved."""
    key = (from_, tuple(values))
    statement = _TRANSITIONS.get(key)
    if statement is None:
        columns = {name: sa.bindparam(f"b_{name}") for name in ("status", *values)}
        statement = _TRANSITIONS[key] = Prepared(
            t.turns.update()
            .where(t.turns.c.id == sa.bindparam("b_id"), _status_in(from_))
            .values(columns)
        )
    params = {"b_id": turn_id, "b_status": to, **{f"b_{k}": v for k, v in values.items()}}
    return tx.execute(statement, params).rowcount == 1


def _status_in(statuses: tuple[TurnState, ...]) -> Any:
    """``status IN (...)`` spelled as ORs: each status a bound value, no expanding list."""
    return sa.or_(*(t.turns.c.status == status.value for status in statuses))


_INSERT_TURN = Prepared(t.turns.insert())
_INPUT_TURN = Prepared(
    t.inputs.update()
    .where(t.inputs.c.id == sa.bindparam("iid"))
    .values(turn_id=sa.bindparam("tid"))
)


def queue_turn(
    tx: Tx,
    session_id: str,
    input_id: str,
    agent_input: dict[str, Any],
    resume: dict[str, Any] | None = None,
) -> str:
    """A new queued turn for ``input_id``; the session gets a runner if it has none."""
    turn_id = new_id("turn")
    row = {
        "id": turn_id,
        "session_id": session_id,
        "seq": tx.bump(session_id, "turn_seq"),
        "input_id": input_id,
        "status": TurnState.QUEUED,
        "input": dumps(agent_input),
        "resume": None if resume is None else dumps(resume),
        "queued_at": now(),
    }
    tx.execute(_INSERT_TURN, row)
    tx.execute(_INPUT_TURN, {"iid": input_id, "tid": turn_id})
    tx.store.dispatch.turn_queued(tx, session_id)
    tx.appended.add(queued_key(session_id))  # wakes the session's runner if it waits
    return turn_id


def claim_next(
    tx: Tx, session_id: str, runner_id: str, keep: bool | Callable[[], bool] = False
) -> Claimed | None:
    """The turn runner ``runner_id`` runs next, or None.

    A runner that is not the session's gets nothing (another one runs it). A
    turn left running (its runner crashed and was recovered, or was replaced)
    is resumed first; else the lowest queued turn starts. Finding neither,
    the runner gives the session up here, in the transaction that saw it
    empty, so an input committed after this names a new runner; with
    ``keep`` (or when ``keep()``, asked only then) it stays the session's
    runner (it waits a moment for the next input, then claims again without
    ``keep``).
    """
    session = tx.lock_session(session_id)
    tx.saw(session_id, int(session.event_seq))  # a resumed turn's claim appends nothing
    if session.runner not in (None, runner_id):
        return None
    if session.runner is None:
        _set_runner(tx, session_id, runner_id)
    turn = tx.execute(_NEXT, {"sid": session_id}).first()
    if turn is None:
        if not (keep() if callable(keep) else keep):
            _set_runner(tx, session_id, None)
        return None
    if turn.status == TurnState.RUNNING:
        if turn.workflow_id != runner_id:
            statement = t.turns.update().where(t.turns.c.id == turn.id)
            tx.execute(statement.values(workflow_id=runner_id))
        return Claimed(turn, resumed=True, session=session)
    started = _transition(
        tx, turn.id, TurnState.RUNNING, _QUEUED, workflow_id=runner_id, started_at=now()
    )
    assert started, "the session row is locked: its queued turn cannot move meanwhile"
    tx.emit(session_id, TurnStarted(json.loads(turn.input)), turn.id)
    return Claimed(turn, resumed=False, session=session)


# The session's turn left running (resumed first), else its lowest queued one.
_NEXT = Prepared(
    sa.select(t.turns)
    .where(
        t.turns.c.session_id == sa.bindparam("sid"),
        _status_in((TurnState.RUNNING, TurnState.QUEUED)),
    )
    .order_by(sa.case((t.turns.c.status == TurnState.RUNNING.value, 0), else_=1), t.turns.c.seq)
    .limit(1)
)
_SET_RUNNER = Prepared(
    t.sessions.update()
    .where(t.sessions.c.id == sa.bindparam("sid"))
    .values(runner=sa.bindparam("runner_id"))
)


def _set_runner(tx: Tx, session_id: str, runner_id: str | None) -> None:
    tx.execute(_SET_RUNNER, {"sid": session_id, "runner_id": runner_id})


def end_turn(
    tx: Tx,
    session_id: str,
    turn_id: str,
    status: TurnState,
    *,
    output: str | None = None,
    error: str | None = None,
    reason: str | None = None,
    usage: dict[str, int] | None = None,
    output_data_json: str | None = None,
    question: dict[str, Any] | None = None,
    agent: str | None = None,
) -> bool:
    """End an active turn (once: False when it had already ended) and tell the listeners
    (``agent``: the session's, when the caller knows it)."""
    assert status.is_terminal()
    output = storable(output)  # a reply's U+0000 cannot go into a text column
    if error is not None:
        error, _ = cut_utf8(storable(error), MAX_ERROR_BYTES)  # type: ignore[arg-type]
    moved = _transition(
        tx,
        turn_id,
        status,
        tuple(ACTIVE),
        output=output,
        error=error,
        reason=reason,
        ended_at=now(),
        usage=None if usage is None else dumps(usage),
        output_data=output_data_json,
    )
    if not moved:
        return False
    result = None
    if status is TurnState.COMPLETED:
        text, truncated = cut_utf8(output or "", MAX_RESULT_BYTES)
        result = {"text": text, "truncated": truncated}
        data = None if output_data_json is None else json.loads(output_data_json)
        event_id = tx.emit(session_id, TurnCompleted(result, data), turn_id)
    elif status is TurnState.FAILED:
        event_id = tx.emit(session_id, TurnFailed(reason, error), turn_id)
    else:
        event_id = tx.emit(session_id, TurnCancelled(reason), turn_id)
    if reason == "held":  # a turn folded into a question's answer is no outcome
        return True
    if agent is None:
        agent = tx.execute(_SESSION_AGENT, {"sid": session_id}).scalar_one()
    ended = TurnEnded(
        session_id,
        agent,
        turn_id,
        event_id,
        status,
        reason,
        error,
        result,
        output,
        question,
    )
    for listener in tx.store.listeners:
        listener.turn_ended(tx, ended)
    return True


def end_asking(
    tx: Tx,
    session_id: str,
    turn_id: str,
    question: Question,
    resume: dict[str, Any],
    data_json: str,
) -> bool:
    """End a running turn as asking ``question``: the session waits for the answer.

    ``resume`` is kept with the question (the ask call, the other calls'
    results) for the turn that answers it. Queued inputs are held: they were
    written without seeing the question.
    """
    asked = question.to_dict()
    moved = tx.execute(
        t.turns.update()
        .where(t.turns.c.id == turn_id, t.turns.c.status == TurnState.RUNNING)
        .values(question=dumps(asked))
    )
    if moved.rowcount != 1:
        return False
    stored = {**asked, **resume}
    tx.execute(
        t.sessions.update()
        .where(t.sessions.c.id == session_id)
        .values(question=dumps(stored), data=data_json)
    )
    options = [{"label": o.label, "value": o.value} for o in question.options]
    approvals = [request.to_dict() for request in question.approvals]
    tx.emit(session_id, QuestionAsked(question.id, question.text, options, approvals), turn_id)
    hold_queued(tx, session_id)
    end_turn(tx, session_id, turn_id, TurnState.COMPLETED, output=question.text, question=asked)
    return True


def hold_queued(tx: Tx, session_id: str) -> None:
    """A question was just asked: inputs still waiting for a turn are held instead.

    Each one's turn is cancelled (``reason="held"``) and the input joins the
    steering of the answer.
    """
    queued = tx.execute(
        sa.select(t.turns.c.id, t.turns.c.input_id)
        .where(t.turns.c.session_id == session_id, t.turns.c.status == TurnState.QUEUED)
        .order_by(t.turns.c.seq)
    ).all()
    for turn_id, _ in queued:
        if end_turn(tx, session_id, turn_id, TurnState.CANCELLED, reason="held"):
            # Its input and any merged into it; one steered into the asking turn
            # is held like the rest (and no longer names that turn).
            statement = t.inputs.update().where(t.inputs.c.turn_id == turn_id)
            tx.execute(statement.values(held=True, turn_id=None, steering_of=None))


def fold_queued(tx: Tx, turn_id: str, reason: str) -> bool:
    """A queued turn whose input another turn took (a steered input's fallback):
    cancelled with ``reason`` and told to nobody (no event, no outcome), as nobody
    was told of it; whether it was still queued."""
    return _transition(tx, turn_id, TurnState.CANCELLED, _QUEUED, reason=reason, ended_at=now())


def cancel_queued(tx: Tx, session_id: str, reason: str) -> list[str]:
    """Cancel the session's queued turns; the ids of its running ones (to stop next)."""
    active = tx.execute(
        sa.select(t.turns.c.id, t.turns.c.status)
        .where(t.turns.c.session_id == session_id, t.turns.c.status.in_(ACTIVE))
        .order_by(t.turns.c.seq)
    ).all()
    running = []
    for turn_id, status in active:
        if status == TurnState.QUEUED:
            end_turn(tx, session_id, turn_id, TurnState.CANCELLED, reason=reason)
        else:
            running.append(turn_id)
    return running


def input_hops(tx: Tx, turn_id: str) -> int:
    """How many hops led to the input ``turn_id`` runs on (``AgentInput.hops``)."""
    stored = tx.execute(sa.select(t.turns.c.input).where(t.turns.c.id == turn_id)).scalar()
    return 0 if stored is None else int(json.loads(stored).get("hops") or 0)


def running(tx: Tx, session_id: str) -> list[str]:
    """The ids of the session's running turns, as this transaction sees them."""
    rows = tx.execute(
        sa.select(t.turns.c.id).where(
            t.turns.c.session_id == session_id, t.turns.c.status == TurnState.RUNNING
        )
    ).all()
    return [row.id for row in rows]


def request_cancel(tx: Tx, turn_id: str, reason: str) -> bool:
    """Ask a running turn to stop (its worker ends it ``cancelled``); whether it runs."""
    statement = (
        t.turns.update()
        .where(t.turns.c.id == turn_id, t.turns.c.status.in_(_RUNNING))
        .values(cancel_reason=reason)
    )
    return tx.execute(statement).rowcount == 1


def end_session(tx: Tx, session_id: str) -> list[str]:
    """Mark the session ended: its queued turns are cancelled and its running ones asked
    to stop, all in this transaction; the ids of the running ones."""
    session = tx.lock_session(session_id)
    if session.ended:
        return []
    tx.execute(
        t.sessions.update()
        .where(t.sessions.c.id == session_id)
        .values(ended=True, ended_at=now(), question=None)
    )
    running = cancel_queued(tx, session_id, "session_ended")
    return [turn_id for turn_id in running if request_cancel(tx, turn_id, "session_ended")]
