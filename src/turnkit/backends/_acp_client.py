"""The client side of an ACP connection: updates in, permission answers out.

Session updates become :class:`~turnkit.StreamEvent` s: agent message chunks
``text_delta``, thought chunks ``thinking_delta``, a tool call ``tool_use``
and its completion (or failure) ``tool_result``. Other updates (plans,
commands, modes) have no StreamEvent and are left out. The client offers no
file system or terminal, so an agent asking for them gets "method not found".
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from acp import schema as acp_schema

from turnkit.agent.results import StreamEvent
from turnkit.backends.permissions import (
    PermissionOption,
    PermissionPolicy,
    PermissionRequest,
    decide_permission,
)
from turnkit.messages import ToolResultBlock, ToolUseBlock
from turnkit.providers.edges import tool_call

__all__ = ["TurnClient"]

_FINISHED = ("completed", "failed")


class TurnClient:
    """An ACP ``Client``: puts the current turn's events on ``queue``."""

    def __init__(self, policy: PermissionPolicy) -> None:
        self.policy = policy
        self.queue: asyncio.Queue[StreamEvent | None] | None = None
        self.policy_errors: list[str] = []
        self._finished_tools: set[str] = set()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Turn one ``session/update`` into events of the current turn."""
        queue = self.queue
        if queue is None:
            return  # between turns (a late update): nobody is listening
        for event in self._events_of(update):
            queue.put_nowait(event)

    async def request_permission(
        self,
        session_id: str,
        tool_call: acp_schema.ToolCallUpdate,
        options: list[acp_schema.PermissionOption],
        **kwargs: Any,
    ) -> acp_schema.RequestPermissionResponse:
        """Answer with the policy's choice; deny when the policy fails."""
        request = PermissionRequest(
            session_id=session_id,
            tool_call_id=tool_call.tool_call_id,
            title=tool_call.title,
            kind=tool_call.kind,
            input=tool_call.raw_input,
            options=tuple(PermissionOption(o.option_id, o.name, o.kind) for o in options),
        )
        try:
            chosen = await decide_permission(self.policy, request)
        except Exception as err:
            self.policy_errors.append(f"permission_policy raised {type(err).__name__}: {err}")
            chosen = await decide_permission("deny", request)
        if chosen is None:
            outcome: Any = acp_schema.DeniedOutcome(outcome="cancelled")
        else:
            outcome = acp_schema.AllowedOutcome(outcome="selected", option_id=chosen)
        return acp_schema.RequestPermissionResponse(outcome=outcome)

    def _events_of(self, update: Any) -> list[StreamEvent]:
        kind = getattr(update, "session_update", None)
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            text = getattr(update.content, "text", None)
            if not isinstance(text, str) or not text:
                return []
            delta = "text_delta" if kind == "agent_message_chunk" else "thinking_delta"
            return [StreamEvent(delta, text=text)]
        events: list[StreamEvent] = []
        if kind == "tool_call":
            events.append(StreamEvent("tool_use", block=_tool_use(update)))
        finished = kind in ("tool_call", "tool_call_update") and update.status in _FINISHED
        if finished and update.tool_call_id not in self._finished_tools:
            self._finished_tools.add(update.tool_call_id)
            events.append(StreamEvent("tool_result", block=_tool_result(update)))
        return events


def _tool_use(update: Any) -> ToolUseBlock:
    """A tool call as a block: the title names it, ``raw_input`` is its input.

    Input that is not a JSON object is kept as raw text, by the rule every
    provider follows (:func:`turnkit.providers.edges.tool_call`).
    """
    name = update.title or update.kind or "tool"
    return tool_call(update.tool_call_id, name, update.raw_input)


def _tool_result(update: Any) -> ToolResultBlock:
    """A finished tool call's output as text; ``is_error`` when it failed."""
    parts: list[str] = []
    for item in update.content or ():
        if item.type == "content" and isinstance(getattr(item.content, "text", None), str):
            parts.append(item.content.text)
        elif item.type == "diff":
            parts.append(f"[diff of {item.path}]")
        elif item.type == "terminal":
            parts.append(f"[terminal {item.terminal_id}]")
    if not parts and update.raw_output is not None:
        raw = update.raw_output
        parts.append(raw if isinstance(raw, str) else json.dumps(raw, default=str))
    failed = update.status == "failed"
    return ToolResultBlock(update.tool_call_id, "\n".join(parts), is_error=failed)
