"""Approvals: tool calls that wait for a person's decision before they run.

A tool made with ``needs_approval`` does not run when the model calls it.
The run runs the reply's other calls, then stops with
``stop_reason="approval_required"`` and lists the held calls as
:class:`ApprovalRequest` s. A later run decides them with :class:`Approval`
s: approved calls run (with an edited input when one is given), denied ones
get an error result that tells the model why, and the loop goes on.

Nothing here knows of :class:`~turnkit.Agent`: these functions take
messages, tool calls and tools, so the agent loop and durable sessions hold
and decide calls by the same rules.

- :func:`needs_approval`: whether one call waits for a decision.
- :func:`pending_calls`: the held calls at the end of a conversation.
- :func:`approval_decisions`: a caller's ``{call_id: bool | Approval}``, checked.
- :func:`decide`: the decisions applied to the held calls (every id
  checked, edited inputs checked against the tool's schema), before
  anything runs.
- :func:`answer_for`: the one user message that answers a reply's calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from turnkit._sync import maybe_await
from turnkit.errors import InvalidMessageError, ToolInputError
from turnkit.messages import FrozenDict, Message, ToolResultBlock, ToolUseBlock, thaw
from turnkit.messages.checks import kind_of, need_str
from turnkit.tools import Tool

__all__ = [
    "Approval",
    "ApprovalRequest",
    "Decided",
    "PendingCalls",
    "answer_for",
    "approval_decisions",
    "decide",
    "denied_result",
    "needs_approval",
    "pending_calls",
]


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A tool call that waits for a decision: its id, the tool's name, its input.

    ``input`` is the input the model gave, as a read-only JSON object.
    """

    call_id: str
    tool: str
    input: Mapping[str, Any]

    def __post_init__(self) -> None:
        object.__setattr__(self, "call_id", need_str(self.call_id, "ApprovalRequest.call_id"))
        object.__setattr__(self, "tool", need_str(self.tool, "ApprovalRequest.tool"))
        if type(self.input) is not FrozenDict:
            if not isinstance(self.input, Mapping):
                problem = f"must be a JSON object, got {kind_of(self.input)}"
                raise TypeError(f"ApprovalRequest.input {problem}")
            try:
                object.__setattr__(self, "input", FrozenDict(self.input))
            except InvalidMessageError as err:
                raise err.within("ApprovalRequest.input") from None

    @classmethod
    def of(cls, call: ToolUseBlock) -> ApprovalRequest:
        """The request for ``call``."""
        return cls(call.id, call.name, call.input)

    def to_dict(self) -> dict[str, Any]:
        """As plain JSON data: ``{"call_id", "tool", "input"}``."""
        return {"call_id": self.call_id, "tool": self.tool, "input": thaw(self.input)}


@dataclass(frozen=True, slots=True)
class Approval:
    """A decision on one held tool call.

    ``approved``: True runs the call, False gives it an error result instead.
    ``reason``: why, for the model (a denied call's result says it).
    ``input``: for an approved call, the input to run it with instead of
    the model's (checked against the tool's schema before anything runs).

    >>> Approval(False, reason="too much")
    Approval(approved=False, reason='too much', input=None)
    """

    approved: bool
    reason: str | None = None
    input: Mapping[str, Any] | None = field(default=None)

    def __post_init__(self) -> None:
        if type(self.approved) is not bool:
            raise TypeError(f"Approval.approved must be True or False, got {self.approved!r}")
        if self.reason is not None:
            if not isinstance(self.reason, str):
                problem = f"must be a string or None, got {kind_of(self.reason)}"
                raise TypeError(f"Approval.reason {problem}")
            object.__setattr__(self, "reason", need_str(self.reason, "Approval.reason"))
        if self.input is None:
            return
        if not isinstance(self.input, Mapping):
            problem = f"must be a JSON object (a dict) or None, got {kind_of(self.input)}"
            raise TypeError(f"Approval.input {problem}")
        if not self.approved:
            raise ValueError("Approval.input is the input of an approved call; a denial takes none")
        try:
            frozen = FrozenDict(self.input)
        except InvalidMessageError as err:
            raise err.within("Approval.input") from None
        object.__setattr__(self, "input", frozen)


@dataclass(frozen=True, slots=True)
class PendingCalls:
    """The calls of a conversation's last assistant message that have no result.

    ``reply`` is that assistant message; ``answer`` the user message right
    after it (holding the results of the calls that ran), or None; ``calls``
    the calls without a result there, in call order.
    """

    reply: Message
    answer: Message | None
    calls: tuple[ToolUseBlock, ...]

    @property
    def requests(self) -> tuple[ApprovalRequest, ...]:
        return tuple(ApprovalRequest.of(call) for call in self.calls)


@dataclass(frozen=True, slots=True)
class Decided:
    """Decisions applied to held calls, checked and ready to carry out.

    ``run``: the approved calls, in call order, each with the input to run
    it with (an edited one in place of the model's). ``denied``: the error
    result of each denied call, by call id. ``decisions``: every decision,
    by call id (for records such as an ``approval.decided`` event).
    """

    run: tuple[ToolUseBlock, ...]
    denied: Mapping[str, ToolResultBlock]
    decisions: Mapping[str, Approval]


async def needs_approval(tool: Tool | None, call: ToolUseBlock) -> bool:
    """Whether ``call`` must wait for a person's decision before it runs.

    Only a call that would run can need one: an unknown tool or an input
    that fails the tool's check gets its error result as usual (the model
    can fix it), so a person is never asked about a call that cannot run.
    ``tool.needs_approval`` is True, False, or a function (sync or async) of
    the checked input; one that raises or returns something other than a
    bool counts as True (logged): a call never runs on a check that failed.
    """
    check = tool.needs_approval if tool is not None else False
    if check is False:
        return False
    from turnkit.providers.edges import raw_arguments_problem  # keeps `import turnkit` light

    if raw_arguments_problem(call.input) is not None:
        return False
    try:
        arguments = tool.check_input(thaw(call.input))  # type: ignore[union-attr]
    except Exception:
        return False  # running it gives the model its error result
    if check is True:
        return True
    try:
        answer = await maybe_await(check(dict(arguments)))
    except Exception:
        _warn(f"needs_approval of tool {call.name!r} raised; the call is held", True)
        return True
    if type(answer) is not bool:
        _warn(f"needs_approval of tool {call.name!r} gave {answer!r}, not a bool; the call is held")
        return True
    return answer


def _warn(text: str, exc_info: bool = False) -> None:
    import logging  # here, not at the top: it keeps `import turnkit` light

    logging.getLogger("turnkit.agent").warning(text, exc_info=exc_info)


def pending_calls(messages: Sequence[Message]) -> PendingCalls | None:
    """The calls still waiting at the end of ``messages``, or None.

    They are the calls of the last assistant message that have no result in
    the user message right after it, when that message (or the assistant
    message itself) ends the conversation: once the conversation has moved
    on, unanswered calls are answered as not run by the usual repair
    (:func:`~turnkit.normalize_tool_call_history`), not held.
    """
    if not messages:
        return None
    answer: Message | None = None
    reply = messages[-1]
    if reply.role == "user" and len(messages) >= 2:
        answer, reply = reply, messages[-2]
    if reply.role != "assistant":
        return None
    answered = set() if answer is None else _result_ids(answer)
    calls = tuple(b for b in reply.content if type(b) is ToolUseBlock and b.id not in answered)
    return PendingCalls(reply, answer, calls) if calls else None


def approval_decisions(approvals: object) -> dict[str, Approval]:
    """``{call_id: True | False | Approval}`` as ``{call_id: Approval}``; raises on bad input.

    Raises TypeError naming the entry for anything else than a mapping of
    string ids to a bool or an :class:`Approval`.
    """
    if not isinstance(approvals, Mapping):
        raise TypeError(
            "approvals must be a dict of {call_id: True | False | Approval}, "
            f"got {kind_of(approvals)}"
        )
    decisions: dict[str, Approval] = {}
    for call_id, value in approvals.items():
        if type(call_id) is not str:
            raise TypeError(f"approvals: call ids must be strings, got {call_id!r}")
        if type(value) is bool:
            value = Approval(value)
        elif not isinstance(value, Approval):
            raise TypeError(
                f"approvals[{call_id!r}] must be True, False or an Approval, got {value!r}"
            )
        decisions[call_id] = value
    return decisions


def decide(
    calls: Sequence[ToolUseBlock],
    decisions: Mapping[str, Approval],
    tools: Mapping[str, Tool],
) -> Decided:
    """Apply ``decisions`` to the held ``calls``, checking everything first.

    Raises ValueError, naming the call, for a decision on an id that is not
    held, a held call left undecided, or an edited input the tool's check
    refuses; so nothing runs unless every decision can be carried out. An
    edited input for a tool not in ``tools`` is left to the run (which
    answers an unknown tool with an error result).
    """
    held = {call.id: call for call in calls}
    for call_id in decisions:
        if call_id not in held:
            waiting = ", ".join(repr(c) for c in held) or "none"
            raise ValueError(
                f"approvals[{call_id!r}]: no tool call with this id waits for a decision "
                f"(waiting: {waiting})"
            )
    undecided = [call for call in calls if call.id not in decisions]
    if undecided:
        names = ", ".join(f"{c.id!r} ({c.name})" for c in undecided)
        raise ValueError(f"approvals: no decision for the waiting tool call(s) {names}")
    run: list[ToolUseBlock] = []
    denied: dict[str, ToolResultBlock] = {}
    for call in calls:
        decision = decisions[call.id]
        if not decision.approved:
            denied[call.id] = denied_result(call, decision.reason)
        elif decision.input is None:
            run.append(call)
        else:
            _check_edited(call, decision.input, tools.get(call.name))
            run.append(ToolUseBlock(call.id, call.name, decision.input))
    return Decided(tuple(run), denied, dict(decisions))


def _check_edited(call: ToolUseBlock, edited: Mapping[str, Any], tool: Tool | None) -> None:
    if tool is None:
        return
    try:
        tool.check_input(thaw(edited))
    except ToolInputError as err:
        raise ValueError(
            f"approvals[{call.id!r}].input does not fit tool {call.name!r}: {err}"
        ) from None


def denied_result(call: ToolUseBlock, reason: str | None) -> ToolResultBlock:
    """The error result a denied call gets: it says so, and why when a reason is given."""
    text = f"The user denied this call of tool {call.name!r}; it did not run."
    if reason:
        text += f" Reason: {reason}"
    return ToolResultBlock(call.id, text, is_error=True)


def answer_for(
    calls: Sequence[ToolUseBlock],
    answer: Message | None,
    results: Mapping[str, ToolResultBlock],
    invocation_id: str | None = None,
) -> Message:
    """The user message answering ``calls`` (a reply's), completing ``answer``.

    It holds a result for every call, in call order: from ``results`` (the
    decided calls, the approved ones' runs), else from ``answer`` (the calls
    that ran before the decisions); then ``answer``'s other blocks. It keeps
    ``answer``'s id, so it takes that message's place, as
    :meth:`~turnkit.Agent.add_message` does: the results to a reply's calls
    belong in the one user message right after it.
    """
    earlier = {} if answer is None else _results_of(answer)
    content: list[Any] = [results.get(c.id) or earlier[c.id] for c in calls]
    if answer is None:
        return Message("user", tuple(content), invocation_id=invocation_id)
    content += [b for b in answer.content if type(b) is not ToolResultBlock]
    return Message("user", tuple(content), id=answer.id, invocation_id=invocation_id)


def _results_of(message: Message) -> dict[str, ToolResultBlock]:
    found: dict[str, ToolResultBlock] = {}
    for block in message.content:
        if type(block) is ToolResultBlock:
            found.setdefault(block.tool_use_id, block)
    return found


def _result_ids(message: Message) -> set[str]:
    return {b.tool_use_id for b in message.content if type(b) is ToolResultBlock}
