"""One Agent's runs on a backend: the text-only boundary, hooks, results.

SPEC section 6. The external agent gets one text prompt per turn: the
``prompt`` of ``before_run``'s context, rewritten or not. Nothing else of the
run's messages reaches it (``AgentConfig.history`` included), so a
``before_run`` that changes the messages fails the run instead of having the
change silently dropped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING

from turnkit.agent.context import (
    RunContext,
    apply_after_run,
    before_run_changes,
    hook_prompt,
    latest_prompt,
    replace_prompt,
)
from turnkit.agent.results import RunResult, StreamEvent
from turnkit.backends._base import Backend, Conversation, text_input
from turnkit.messages import Block, Message, TextBlock, validate_messages

if TYPE_CHECKING:
    from turnkit.agent.config import AgentConfig
    from turnkit.agent.loop import RunState

__all__ = ["BackendRunner"]

# Settings that shape what a model sees: an external agent has its own, and
# dropping them silently would surprise, so they are refused.
_MODEL_ONLY = (
    "tools",
    "system",
    "transform_context",
    "convert_to_llm",
    "max_output_tokens",
    "temperature",
    "thinking",
)


class BackendRunner:
    """Runs one Agent's turns on its backend (see :meth:`Backend.bind`)."""

    def __init__(self, backend: Backend, config: AgentConfig) -> None:
        for field in _MODEL_ONLY:
            value = getattr(config, field)
            if bool(value) if field == "tools" else value is not None:
                raise ValueError(
                    f"AgentConfig.{field} cannot be used with a backend: the external agent "
                    f"({backend!r}) brings its own and takes one text prompt per turn"
                )
        self._backend = backend
        self._name = config.name
        self._before_run = config.before_run
        self._after_run = config.after_run
        self._conversation: Conversation | None = None

    def run_input(self, value: object) -> tuple[Message, ...]:
        """``run()``/``stream()`` input: a str only (InvalidMessageError otherwise)."""
        return (Message("user", (TextBlock(text_input(value, self._backend)),)),)

    def prompt_blocks(self, value: object) -> tuple[Block, ...]:
        """``prompt()`` input: a str only (InvalidMessageError otherwise)."""
        return (TextBlock(text_input(value, self._backend)),)

    async def events(
        self, state: RunState, *, streaming: bool, session: bool
    ) -> AsyncIterator[StreamEvent]:
        """The run of ``state`` as events, ``done`` last (as ``Agent._events``).

        ``session``: a ``prompt()`` turn, sent on this agent's conversation.
        """
        prompt, refusal = await self._hooked_prompt(state)
        result: RunResult | None = None
        if refusal is not None:
            result = RunResult(False, stop_reason="error", error=refusal)
        elif session:
            if self._conversation is None:
                self._conversation = self._backend.conversation()
            result = await self._conversation.send(prompt)
        else:
            async with aclosing(self._backend.turn(prompt)) as events:
                async for event in events:
                    if event.type == "done":
                        result = event.result
                    elif streaming:
                        yield event
        if result is None:
            raise RuntimeError(f"{self._backend!r} ended a turn without a result")
        result = _stamped(result, state.invocation_id)
        if streaming:
            for message in result.messages:
                yield StreamEvent("message", message=message)
        if self._after_run is not None:
            result = await apply_after_run(self._after_run, self._context(state), result)
        if streaming and not result.success:
            yield StreamEvent("error", error=result.error)
        yield StreamEvent("done", result=result)

    async def aclose(self) -> None:
        """End this agent's conversation (its session process, if any)."""
        conversation, self._conversation = self._conversation, None
        if conversation is not None:
            await conversation.aclose()

    async def _hooked_prompt(self, state: RunState) -> tuple[str, str | None]:
        """The text to send after ``before_run``, or why the run must fail."""
        received = latest_prompt(state.input)
        if self._before_run is None:
            return received, None
        original = [m.to_dict() for m in state.input]
        changes = await before_run_changes(self._before_run, self._context(state))
        if "messages" in changes:
            returned = validate_messages(changes["messages"], path="before_run().messages")
            if [m.to_dict() for m in returned] != original:
                return "", (
                    "before_run returned messages that differ from ctx.messages; they cannot "
                    f"be forwarded without loss to {type(self._backend).__name__}, which takes "
                    "one text prompt per turn (rewrite the prompt instead)"
                )
        prompt = hook_prompt(changes, received)
        if prompt != received:
            state.input = replace_prompt(state.input, prompt)
        return prompt, None

    def _context(self, state: RunState) -> RunContext:
        messages = list(state.input)
        return RunContext(messages, latest_prompt(messages), self._name, state.invocation_id)


def _stamped(result: RunResult, invocation_id: str) -> RunResult:
    """``result`` with its messages marked as produced by run ``invocation_id``."""
    if not result.messages:
        return result
    messages = tuple(m.clone(invocation_id=invocation_id) for m in result.messages)
    return replace(result, messages=messages)
