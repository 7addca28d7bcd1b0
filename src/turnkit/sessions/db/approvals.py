"""Deciding held tool calls: in the transaction that accepts the deciding input.

An open question with ``approvals`` is answered like any question (see
:mod:`.inputs`); the answer also decides the held calls. ``app.approve``
gives a decision per call (:func:`approve`, checked against the question
with the session row locked, so nothing is stored unless every decision
fits); any other answer decides all of them alike (value ``approve``
approves, anything else denies). The decisions go with the answer's turn
(its ``resume``), and each one is an ``approval.decided`` event, all in the
transaction that stores the input: a crash after it finds the decision
recorded and the calls not yet run; the turn runs them once.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from turnkit.agent.approvals import Approval
from turnkit.errors import InvalidInputError, NoApprovalOpenError, SessionEndedError, ToolInputError
from turnkit.messages import thaw
from turnkit.sessions.db.store import Store, Tx
from turnkit.sessions.model.checks import check_payload
from turnkit.sessions.model.events import ApprovalDecided
from turnkit.sessions.model.records import Question, Receipt
from turnkit.sessions.render.approvals import (
    APPROVE,
    DENY,
    MIXED,
    answer_decisions,
    decision_json,
)
from turnkit.tools import Tool

if TYPE_CHECKING:
    from turnkit.sessions.db.inputs import NewInput

__all__ = ["Decisions", "answer_resume", "approve", "record_decisions"]

ToolNamed = Callable[[str], "Tool | None"]


@dataclass(frozen=True, slots=True)
class Decisions:
    """``app.approve``'s decisions, checked against the open question: one per held call."""

    approvals: dict[str, Approval]

    @property
    def value(self) -> str:
        """The answer's value: ``approve``, ``deny`` or ``mixed``."""
        approved = {d.approved for d in self.approvals.values()}
        if approved == {True}:
            return APPROVE
        return DENY if approved == {False} else MIXED


def approve(
    store: Store,
    session_id: str,
    decisions: bool | Mapping[str, Approval],
    reason: str | None,
    tool_named: ToolNamed,
) -> Receipt:
    """Decide the session's held calls (``app.approve``) in one transaction.

    Raises :class:`~turnkit.errors.NoApprovalOpenError` when no question with
    approvals is open, and :class:`~turnkit.errors.InvalidInputError` naming
    the call for an unknown or missing call id or an edited input its tool
    refuses; then nothing is stored.
    """
    from turnkit.sessions.db.inputs import NewInput, accept

    with store.write() as tx:
        session = tx.lock_session(session_id)
        if session.ended:
            raise SessionEndedError(session_id)
        stored = None if session.question is None else json.loads(session.question)
        if not stored or not stored.get("approvals"):
            raise NoApprovalOpenError(session_id)
        question = Question.from_dict(stored)
        checked = _checked(question, decisions, reason, tool_named)
        payload = {"decisions": {i: decision_json(d) for i, d in checked.approvals.items()}}
        payload_json = check_payload(payload, field="decisions")
        new = NewInput("user", checked.value, payload_json, {}, answers=question.id)
        new.decisions = checked
        return accept(tx, session_id, new)


def _checked(
    question: Question,
    decisions: bool | Mapping[str, Approval],
    reason: str | None,
    tool_named: ToolNamed,
) -> Decisions:
    held = {request.call_id: request for request in question.approvals}
    if type(decisions) is bool:
        decisions = {call_id: Approval(decisions) for call_id in held}
    waiting = ", ".join(f"{r.call_id!r} ({r.tool})" for r in question.approvals)
    for call_id in decisions:
        if call_id not in held:
            raise InvalidInputError(
                f"decisions[{call_id!r}]",
                f"no tool call with this id waits for a decision (waiting: {waiting})",
            )
    missing = [r for r in question.approvals if r.call_id not in decisions]
    if missing:
        names = ", ".join(f"{r.call_id!r} ({r.tool})" for r in missing)
        raise InvalidInputError(
            "decisions", f"every waiting tool call needs a decision; none for {names}"
        )
    out: dict[str, Approval] = {}
    for request in question.approvals:
        decision = decisions[request.call_id]
        if decision.input is not None:
            _check_edited(request.call_id, request.tool, decision.input, tool_named)
        if decision.reason is None and reason is not None:
            decision = Approval(decision.approved, reason, decision.input)
        out[request.call_id] = decision
    return Decisions(out)


def _check_edited(call_id: str, name: str, edited: Any, tool_named: ToolNamed) -> None:
    tool = tool_named(name)
    if tool is None:
        return  # a tool only a render offers (an MCP server's): checked when the turn runs
    try:
        tool.check_input(thaw(edited))
    except ToolInputError as err:
        raise InvalidInputError(
            f"decisions[{call_id!r}].input", f"does not fit tool {name!r}: {err}"
        ) from None


def answer_resume(
    stored: dict[str, Any], new: NewInput, agent_input: dict[str, Any]
) -> dict[str, Any]:
    """What the answer's turn needs to carry out the decisions (``{}`` for a plain ask).

    Sets the answer's value: ``approve``, ``deny`` or (``app.approve`` only) ``mixed``.
    """
    if not stored.get("approvals"):
        return {}
    decided = new.decisions
    if isinstance(decided, Decisions):
        decisions, value = decided.approvals, decided.value
    else:
        decisions, value = answer_decisions(Question.from_dict(stored), new.text)
    agent_input["answer"]["value"] = value
    return {
        "approvals": stored["approvals"],
        "decisions": {call_id: decision_json(d) for call_id, d in decisions.items()},
    }


def record_decisions(
    tx: Tx, session_id: str, turn_id: str, resume: dict[str, Any], new: NewInput
) -> None:
    """One ``approval.decided`` event per held call, in call order (none for a plain ask)."""
    if not resume.get("approvals"):
        return
    channel = new.details.get("channel") or {}
    for request in resume["approvals"]:
        decision = resume["decisions"][request["call_id"]]
        event = ApprovalDecided(
            request["call_id"],
            request["tool"],
            decision["approved"],
            decision["reason"],
            new.source,
            channel.get("user_id"),
            decision["input"],
        )
        tx.emit(session_id, event, turn_id)
