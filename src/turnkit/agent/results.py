"""What a run gives back: a :class:`RunResult`, or :class:`StreamEvent` s."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from turnkit.agent.approvals import ApprovalRequest
from turnkit.messages import Block, Message
from turnkit.providers.base import Usage

__all__ = ["RunResult", "StreamEvent", "StreamEventType"]

StreamEventType = Literal[
    "text_delta",
    "thinking_delta",
    "tool_use",
    "tool_result",
    "message",
    "done",
    "error",
    "approval_required",
]


@dataclass(frozen=True, slots=True)
class RunResult:
    """The outcome of a run.

    - ``success``: the model gave a final answer (no tool calls left), or
      the run stopped for approvals.
    - ``output``: the final answer's text ("" when the run failed).
    - ``messages``: what the run produced, in order: assistant replies and the
      user messages holding tool results; never its input.
    - ``usage``: tokens used by all the run's model calls.
    - ``stop_reason``: the last model call's (``end_turn``, ``max_tokens``,
      ``refusal``, ...), or ``max_turns`` or ``error`` for a failed run, or
      ``approval_required`` when tool calls wait for a person's decision.
    - ``error``: what went wrong, when ``success`` is False.
    - ``exception``: the exception behind ``error`` when there was one (a
      :class:`~turnkit.errors.ProviderError` says whether a retry can help).
    - ``output_data``: with ``AgentConfig.output_type``, the validated answer
      (a model or dataclass instance, a TypedDict's dict, or the JSON data for
      a schema dict); ``output`` keeps its JSON text. None otherwise.
    - ``approvals``: with ``stop_reason="approval_required"``, the held
      calls as :class:`~turnkit.ApprovalRequest` s; decide them with
      ``run(..., approvals=...)`` or ``continue_run(approvals=...)``.
    """

    success: bool
    output: str = ""
    messages: tuple[Message, ...] = ()
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "end_turn"
    error: str | None = None
    exception: Exception | None = field(default=None, repr=False, compare=False)
    output_data: Any = None
    approvals: tuple[ApprovalRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One event of :meth:`Agent.stream`.

    ``text_delta`` and ``thinking_delta`` carry the new piece as ``text``;
    ``tool_use`` and ``tool_result`` carry the ``block``; ``message`` carries
    each ``message`` the run adds, once complete; ``error`` carries the
    ``error`` text of a failed run; ``done`` (always last) carries the
    :class:`RunResult` as ``result``, or ``approval_required`` does instead
    when the run stopped for approvals (its result lists them).
    """

    type: StreamEventType
    text: str = ""
    block: Block | None = None
    message: Message | None = None
    result: RunResult | None = None
    error: str | None = None
