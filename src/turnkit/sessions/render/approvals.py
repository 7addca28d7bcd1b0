"""Held tool calls as a person sees them (a question) and as the model sees the decision.

A session turn whose model reply calls a tool made with ``needs_approval``
ends with a :class:`~turnkit.sessions.model.records.Question` whose
``approvals`` lists the held calls and whose options are Approve and Deny
(SPEC section 7, "Approvals"). The turn that answers it starts from the
held calls' reply: its first message is the one answer to that reply's
calls, made by the run (the results of the calls that ran beside the held
ones, then those of the decided ones), with the steering after them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from turnkit.agent.approvals import Approval, ApprovalRequest
from turnkit.messages import Message, TextBlock, ToolResultBlock, thaw, validate_blocks
from turnkit.sessions.model.inputs import AgentInput
from turnkit.sessions.model.records import Question, QuestionOption
from turnkit.sessions.render.ask import answer_value
from turnkit.sessions.render.present import steering_text

__all__ = [
    "APPROVE",
    "DENY",
    "MIXED",
    "OPTIONS",
    "answer_decisions",
    "approval_question",
    "decision_from_json",
    "decision_json",
    "held_answer",
]

APPROVE, DENY, MIXED = "approve", "deny", "mixed"
OPTIONS = (QuestionOption("Approve", APPROVE), QuestionOption("Deny", DENY))
_SHOWN_INPUT_CHARS = 1500  # of each call's input in the question's text (approvals has it all)


def approval_question(turn_id: str, requests: Sequence[ApprovalRequest]) -> Question:
    """The question held calls ask; its id is the same on every replay of the turn."""
    seed = f"{turn_id}\0approvals\0{requests[0].call_id}"
    digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return Question(f"q_{digest}", _question_text(requests), OPTIONS, turn_id, tuple(requests))


def _shown(request: ApprovalRequest) -> str:
    text = json.dumps(request.to_dict()["input"], ensure_ascii=False)
    if len(text) > _SHOWN_INPUT_CHARS:
        text = text[:_SHOWN_INPUT_CHARS] + " …(cut)"
    return f"{request.tool} {text}"


def _question_text(requests: Sequence[ApprovalRequest]) -> str:
    if len(requests) == 1:
        return f"Approve this tool call? {_shown(requests[0])}"
    lines = [f"Approve these {len(requests)} tool calls?"]
    lines += [f"{number}. {_shown(r)}" for number, r in enumerate(requests, start=1)]
    return "\n".join(lines)


def answer_decisions(question: Question, text: str | None) -> tuple[dict[str, Approval], str]:
    """An answer that is not an ``app.approve``: it decides every held call alike.

    Its value ``approve`` (the option's value or label, any case) approves;
    anything else denies, and a text that is not ``deny`` becomes the reason.
    Returns the decisions by call id, and the answer's value.
    """
    value = answer_value(question, text)
    if value == APPROVE:
        return {r.call_id: Approval(True) for r in question.approvals}, APPROVE
    reason = None if value == DENY or not text or not text.strip() else text.strip()
    return {r.call_id: Approval(False, reason=reason) for r in question.approvals}, DENY


def decision_json(decision: Approval) -> dict[str, Any]:
    """A decision as stored with the turn that carries it out."""
    edited = None if decision.input is None else thaw(decision.input)
    return {"approved": decision.approved, "reason": decision.reason, "input": edited}


def decision_from_json(data: Mapping[str, Any]) -> Approval:
    return Approval(data["approved"], data.get("reason"), data.get("input"))


def held_answer(
    item: AgentInput,
    results: Sequence[Any],
    extra: Sequence[ToolResultBlock],
    invocation_id: str,
) -> Message | None:
    """The partial answer to the held calls' reply that the run completes: the
    results of the calls that ran beside them (``results``, as stored), then
    ``extra`` (calls that will not run), then the steering; None when empty."""
    blocks: list[Any] = [*validate_blocks(list(results)), *extra]
    steering = steering_text(item)
    if steering:
        blocks.append(TextBlock(steering))
    if not blocks:
        return None
    return Message("user", tuple(blocks), invocation_id=invocation_id)
