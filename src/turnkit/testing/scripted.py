"""ScriptedModel: a model that answers from a script, for tests."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from turnkit._sync import maybe_await
from turnkit.messages import (
    Message,
    Origin,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    message_text_body,
)
from turnkit.messages.message import stamped
from turnkit.messages.prefix import PrefixMemo
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
from turnkit.providers.rules import replay_thinking

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
    token per four characters, so budgets can be tested. ``context_window``
    plays a model's window (None: unknown), for compaction tests.

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
        self._seen: dict[str, PrefixMemo[_Seen]] = {}  # by thinking_replay
        self._made_origin: Origin | None = None

    async def request(self, request: ModelRequest) -> ModelResponse:
        system, messages, chars = self._as_seen(request)
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
        usage = Usage(max(1, math.ceil(chars / 4)), _tokens_of(message))
        return ModelResponse(message, usage, "tool_use" if calls else "end_turn")

    def _as_seen(self, request: ModelRequest) -> tuple[str | None, tuple[Message, ...], int]:
        """The system text, the messages as a provider gets them (system
        hoisted, thinking replayed as the rules say) and their characters.

        What a real provider's conversion would cost is not this double's to
        add: the work on the start of a conversation it has seen is kept
        (messages are immutable), so its cost does not grow with the history.
        """
        mode = request.settings.thinking_replay
        memo = self._seen.setdefault(mode, PrefixMemo())
        given = request.messages
        found = memo.find(given)
        count, done = found if found is not None else (0, _Seen((), None, 0))
        new = _seen_of(given[count:], self.provider, self.name, mode)
        if done.messages is None and new.messages is None:
            messages = given  # nothing hoisted or replayed: no copy
            kept = None
        else:
            before = given[:count] if done.messages is None else done.messages
            messages = kept = before + (given[count:] if new.messages is None else new.messages)
        seen = _Seen(done.system + new.system, kept, done.chars + new.chars)
        memo.store(given, seen)
        system = "\n\n".join(part for part in (request.system, *seen.system) if part) or None
        return system, messages, len(system or "") + seen.chars

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
            return Message.assistant(reply, origin=self._origin())
        if isinstance(reply, Message):
            message = reply
        elif isinstance(reply, Mapping):
            message = Message.from_dict(reply)
        else:
            raise TypeError(f"a scripted reply must be a str, Message or dict, got {reply!r}")
        if message.role != "assistant":
            raise ValueError(f"a scripted reply must be an assistant message, got {message.role}")
        if message.origin is None:
            message = stamped(message, origin=self._origin())  # a valid message stays valid
        return message

    def _origin(self) -> Origin:
        """This model's Origin, built once (again if ``name`` was changed)."""
        origin = self._made_origin
        if origin is None or origin.model != self.name or origin.provider != self.provider:
            origin = self._made_origin = Origin(self.provider, self.name)
        return origin


def _pieces(text: str) -> list[str]:
    """Split text into word-sized deltas that join back to it exactly."""
    pieces, start = [], 0
    for index, char in enumerate(text):
        if char == " " and index > start:
            pieces.append(text[start:index])
            start = index
    pieces.append(text[start:])
    return [piece for piece in pieces if piece]


@dataclass(frozen=True, slots=True)
class _Seen:
    system: tuple[str, ...]  # the text of each system message
    messages: tuple[Message, ...] | None  # the others, thinking replayed; None: as given
    chars: int  # characters of their text bodies


def _seen_of(messages: tuple[Message, ...], provider: str, model: str, mode: Any) -> _Seen:
    """``hoist_system`` and ``replay_thinking`` of the rules, message by message,
    and the characters of what is left."""
    system: tuple[str, ...] = ()
    rest: tuple[Message, ...] | None = None  # None: ``messages`` as they are
    if "system" in set(map(_ROLE, messages)):
        system = tuple(
            "\n".join(b.text for b in m.content if isinstance(b, TextBlock))
            for m in messages
            if m.role == "system"
        )
        rest = tuple(m for m in messages if m.role != "system")
    chars, thinking = 0, False
    for message in messages if rest is None else rest:
        content = message.content
        if len(content) == 1 and type(content[0]) is TextBlock:
            chars += len(content[0].text)  # message_text_body's length, without building it
        else:
            thinking = thinking or ThinkingBlock in set(map(type, content))
            chars += len(message_text_body(message))
    if not thinking:
        return _Seen(system, rest, chars)
    replayed = replay_thinking(messages if rest is None else rest, provider, model, mode)
    return _Seen(system, replayed, sum(len(message_text_body(m)) for m in replayed))


_ROLE = attrgetter("role")


def _tokens_of(message: Message) -> int:
    return max(1, math.ceil(len(message_text_body(message)) / 4))
