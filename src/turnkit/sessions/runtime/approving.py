"""A session turn's approvals: held calls end the turn; the answer's turn runs the decided ones.

The agent loop holds a reply's calls that need approval and runs the
others (:mod:`turnkit.agent.approvals`); in a session the turn then ends
with a question (:func:`held_question`), the results of the calls that ran
kept with it, as an ``ask`` keeps its neighbours' results. The turn that
answers starts from the held calls' reply (:func:`decided_start`): the loop
gets the decisions and completes the reply's answer (approved calls run as
durable tool steps, denied ones get their error result), and that answer is
the turn's first stored message. A replay after a crash finds it stored, or
not: then the tool steps already recorded are reused, so an approved call
runs at most once, and one cut short is answered as interrupted unless its
tool is idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from turnkit.agent.approvals import Approval, pending_calls
from turnkit.errors import ToolInputError
from turnkit.messages import Message, ToolResultBlock, ToolUseBlock, thaw
from turnkit.sessions.model.records import Question
from turnkit.sessions.render.approvals import approval_question, decision_from_json, held_answer
from turnkit.tools import Tool

if TYPE_CHECKING:
    from turnkit.agent.results import RunResult
    from turnkit.sessions.db.steps import Claim
    from turnkit.sessions.definitions import Definitions
    from turnkit.sessions.runtime.durable import DurableModel

__all__ = ["decided_start", "held_question", "is_partial_answer"]


def is_partial_answer(reply: Message | None, message: Message) -> bool:
    """Whether ``message`` answers only some of ``reply``'s calls (the rest are held)."""
    if reply is None or message.role != "user":
        return False
    answered = {b.tool_use_id for b in message.content if type(b) is ToolResultBlock}
    calls = [b.id for b in reply.content if type(b) is ToolUseBlock]
    return bool(calls) and not answered.issuperset(calls)


def held_question(
    claim: Claim, result: RunResult, held_results: Sequence[ToolResultBlock], ask_call: str | None
) -> tuple[Question, dict[str, Any]]:
    """The question a turn whose calls wait for approval ends with, and what it keeps
    for the answer's turn. An ``ask`` in the same reply is not asked: one question
    at a time, and a decision comes first (its result tells the model to ask again)."""
    question = approval_question(claim.turn_id, result.approvals)
    results = list(held_results)
    if ask_call is not None:
        results.append(ToolResultBlock(ask_call, _ASK_NOT_ASKED, is_error=True))
    return question, {"call_id": None, "results": [block.to_dict() for block in results]}


_ASK_NOT_ASKED = (
    "The question was not asked: other tool calls of the same reply wait for the user's "
    "approval, which is asked first. Ask again if you still need to."
)


async def decided_start(
    claim: Claim, model: DurableModel, definitions: Definitions
) -> tuple[tuple[Message, ...], dict[str, Approval] | None]:
    """The conversation a turn starts from, and the decisions the loop carries out first.

    None for a turn that decides nothing, or whose answer to the held calls is
    already stored (a replay): it goes on from there. Otherwise the
    conversation ends with the held calls' reply and a partial answer (the
    results kept with the question, then the steering), which the loop
    completes. An edited input the tool refuses (a tool no check could see
    before, such as an MCP server's) gets an error result and does not run.
    """
    resume = claim.resume
    if not resume or not resume.get("approvals"):
        return claim.history, None
    pending = pending_calls(claim.history)
    held = [a["call_id"] for a in resume["approvals"]]
    if pending is None or pending.answer is not None:
        return claim.history, None  # answered already (stored before a crash)
    calls = {call.id: call for call in pending.calls}
    if not set(held) <= set(calls):
        return claim.history, None  # not the reply that held them: the usual repair answers
    decisions = {i: decision_from_json(d) for i, d in resume["decisions"].items() if i in held}
    approved = [calls[i] for i, d in decisions.items() if d.approved]
    await _offer(approved, model, definitions)
    kept = resume.get("results") or []
    ran = {block.get("tool_use_id") for block in kept}
    extra: list[ToolResultBlock] = []
    for call in pending.calls:
        if call.id in decisions:
            problem = _edit_problem(call, decisions[call.id], model.tools)
            if problem is not None:
                extra.append(ToolResultBlock(call.id, problem, is_error=True))
                del decisions[call.id]
        elif call.id not in ran:
            extra.append(ToolResultBlock(call.id, _not_run(call.name), is_error=True))
    partial = held_answer(claim.input, kept, extra, claim.turn_id)
    history = claim.history if partial is None else (*claim.history, partial)
    return history, decisions


async def _offer(approved: Sequence[ToolUseBlock], model: DurableModel, definitions: Any) -> None:
    """Make the approved calls' tools known before the turn's first model call:
    by name (the agent's and the App's tools), else through one render."""
    missing = [call.name for call in approved if call.name not in model.tools]
    for name in missing:
        found = definitions.tools.get(name)
        if found is not None:
            model.tools[name] = found
    if any(call.name not in model.tools for call in approved):
        await model.offer_tools()


def _edit_problem(call: ToolUseBlock, decision: Approval, tools: Mapping[str, Tool]) -> str | None:
    tool = tools.get(call.name)
    if decision.input is None or not decision.approved or tool is None:
        return None
    try:
        tool.check_input(thaw(decision.input))
    except ToolInputError as err:
        return (
            f"The input the user approved for tool {call.name!r} does not fit its schema "
            f"({err}); the call did not run."
        )
    return None


def _not_run(name: str) -> str:
    return f"Tool call {name} was not run: it waited for a decision that did not cover it."
