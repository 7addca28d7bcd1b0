"""``turnkit.subagent``: a tool that hands a task to another agent's session.

A call creates a child session of that agent, linked to the calling session
(``Session.parent_id``), and sends it the task (``source="subagent"``, text =
the task, payload = the call's payload). Both are keyed by the calling turn
and tool call, so a replay after a crash finds the same child and the same
input instead of starting another: the tool is idempotent, and a parent
that dies while the child runs gets the child's result after its restart.

- ``wait=True``: the call's result is the child turn's final text (at most
  16 KB of UTF-8, marked when cut) or its error. A child that ends its turn
  by asking a question does not hang the parent: the result says what it
  asked and how to answer it (``send(child_session, text, answers=...)``).
- ``wait=False``: the result is the child's session and turn ids at once;
  the parent subscribes to the child, so each of the child's outcomes later
  reaches the parent as an ``event`` input.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from turnkit._values import cut_utf8
from turnkit.tools import Tool

__all__ = ["MAX_RESULT_BYTES", "ToolCallScope", "child_key", "current_call", "subagent"]

MAX_RESULT_BYTES = 16 * 1024
_MAX_KEY_CHARS = 500  # a session key's column (checks.MAX_KEY_CHARS)


@dataclass(frozen=True, slots=True)
class ToolCallScope:
    """The session tool call being run: what a session-aware tool needs.

    ``delegate(scope, agent, task, payload, wait)`` starts a child session's
    turn for the call (the running App's runtime provides it).
    """

    delegate: Callable[..., Awaitable[str]]
    session_id: str
    turn_id: str
    call_id: str
    hops: int = 0  # of the calling turn's input: a child's task counts one more


current_call: ContextVar[ToolCallScope | None] = ContextVar("turnkit_tool_call", default=None)

_SCHEMA = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "minLength": 1, "description": "What the agent should do."},
        "payload": {"description": "Data for the task (any JSON), if any."},
    },
    "required": ["task"],
}


def subagent(agent: str, description: str, wait: bool = True, *, name: str | None = None) -> Tool:
    """A tool that runs a task in a child session of ``agent`` (an agent of the App).

    ``description`` tells the model when to use it; the tool is named after
    the agent unless ``name`` is given.
    """
    if not isinstance(agent, str) or not agent:
        raise ValueError(f"subagent: agent must be an agent's name, got {agent!r}")
    if not isinstance(description, str) or not description.strip():
        raise ValueError("subagent: describe what the agent does, for the model")
    tool_name = name or re.sub(r"[^A-Za-z0-9_-]", "_", agent)[:64]

    async def delegate(task: str, payload: Any = None) -> str:
        scope = current_call.get()
        if scope is None:
            raise RuntimeError(f"subagent tool {tool_name!r} works only in an App session")
        return await scope.delegate(scope, agent, task, payload, wait)

    return Tool(tool_name, description, _SCHEMA, delegate, idempotent=True, timeout_s=None)


def child_key(turn_id: str, call_id: str) -> str:
    """The child session's key: ``subagent:<turn id>:<call id>``, or with a digest of
    a call id its column cannot hold (the model chose it: any length, U+0000)."""
    key = f"subagent:{turn_id}:{call_id}"
    if len(key) <= _MAX_KEY_CHARS and "\x00" not in call_id:
        return key
    digest = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"subagent:{turn_id}#{digest}"


def child_result(turn: Any) -> str:
    """What a waiting parent's tool call returns for a terminal child turn."""
    if turn.question is not None:
        question = turn.question
        options = ", ".join(f"{o.label!r}" for o in question.options)
        return (
            f"The sub-agent asked a question and is waiting for the answer: {question.text!r}"
            + (f" (options: {options})" if options else "")
            + f". To answer, send it to session {turn.session_id} with answers={question.id!r}."
        )
    if turn.status != "completed":
        raise RuntimeError(
            f"the sub-agent's turn {turn.status} ({turn.reason}): {turn.error or 'no error text'}"
        )
    text, truncated = cut_utf8(turn.output or "", MAX_RESULT_BYTES)
    if not truncated:
        return text
    text, _ = cut_utf8(text, MAX_RESULT_BYTES - len(_CUT.encode()))
    return text + _CUT


_CUT = "\n[truncated: the reply was longer than 16 KB]"


def started(session_id: str, turn_id: str | None) -> str:
    return json.dumps({"session_id": session_id, "turn_id": turn_id})
