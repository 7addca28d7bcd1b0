"""ScriptedModel: a model that answers from a script, for tests."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from turnkit._sync import maybe_await
from turnkit.messages import Message, Origin, ToolUseBlock, message_text_body
from turnkit.providers.base import (
    Model,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    OutputSchema,
    ToolSpec,
    Usage,
    events_of,
)
from turnkit.providers.rules import hoist_system, replay_thinking

__all__ = ["ScriptExhaustedError", "ScriptedModel", "ScriptedRequest"]

Reply = str | Message | Mapping[str, Any] | Callable[["ScriptedRequest"], Any]


class ScriptExhaustedError(AssertionError):
    """The model was called more times than its script has replies."""


@dataclass(frozen=True, slots=True)
class ScriptedRequest:
    """A request as a provider would get it, after the whole pipeline."""

    system: str | None
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    settings: ModelSettings
    output: OutputSchema | None = None  # the answer's schema, when asked for natively

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(tool.name for tool in self.tools)

    @property
    def last_text(self) -> str:
        """The text of the last message, as a person would read it."""
        return message_text_body(self.messages[-1]) if self.messages else ""


class ScriptedModel(Model):
    """Replies from a script: each item a str (final text), a Message or
    message dict (an assistant message, tool calls included), or a callable
    that receives the :class:`ScriptedRequest` and returns one of those
    (sync or async). Calls past the end of the script raise.

    ``requests`` records every request received. Usage is estimated at one
    token per four characters, so budgets can be tested.

    >>> model = ScriptedModel(["Paris."])
    """

    provider = "scripted"

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        name: str = "scripted",
        structured_output: bool = False,
        context_window: int | None = None,
    ) -> None:
        self.name = name
        self.context_window = context_window
        self.structured_output = structured_output
        self.replies: list[Reply] = list(replies)
        self.requests: list[ScriptedRequest] = []

    async def request(self, request: ModelRequest) -> ModelResponse:
        system, messages = hoist_system(request)
        messages = replay_thinking(
            messages, self.provider, self.name, request.settings.thinking_replay
        )
        seen = ScriptedRequest(system, messages, request.tools, request.settings, request.output)
        self.requests.append(seen)
        index = len(self.requests) - 1
        if index >= len(self.replies):
            raise ScriptExhaustedError(
                f"ScriptedModel got request {index + 1} but its script has "
                f"{len(self.replies)} replies"
            )
        reply = self.replies[index]
        if callable(reply):
            reply = await maybe_await(reply(seen))
        message = self._as_message(reply)
        calls = any(type(b) is ToolUseBlock for b in message.content)
        usage = Usage(_tokens(seen), _tokens_of(message))
        return ModelResponse(message, usage, "tool_use" if calls else "end_turn")

    def takes_output_schema(self, with_tools: bool) -> bool:
        """``structured_output=True`` plays a model with native structured output
        (requests then carry ``output``); otherwise the agent offers a tool."""
        return self.structured_output

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        response = await self.request(request)
        for event in events_of(response):
            if event.type == "text_delta":
                for piece in _pieces(event.text):
                    yield ModelEvent("text_delta", text=piece)
            else:
                yield event

    def _as_message(self, reply: object) -> Message:
        if isinstance(reply, str):
            message = Message.assistant(reply)
        elif isinstance(reply, Message):
            message = reply
        elif isinstance(reply, Mapping):
            message = Message.from_dict(reply)
        else:
            raise TypeError(f"a scripted reply must be a str, Message or dict, got {reply!r}")
        if message.role != "assistant":
            raise ValueError(f"a scripted reply must be an assistant message, got {message.role}")
        if message.origin is None:
            message = message.clone(origin=Origin(self.provider, self.name))
        return message


def _pieces(text: str) -> list[str]:
    """Split text into word-sized deltas that join back to it exactly."""
    pieces, start = [], 0
    for index, char in enumerate(text):
        if char == " " and index > start:
            pieces.append(text[start:index])
            start = index
    pieces.append(text[start:])
    return [piece for piece in pieces if piece]


def _tokens(request: ScriptedRequest) -> int:
    chars = len(request.system or "") + sum(len(message_text_body(m)) for m in request.messages)
    return max(1, math.ceil(chars / 4))


def _tokens_of(message: Message) -> int:
    return max(1, math.ceil(len(message_text_body(message)) / 4))
