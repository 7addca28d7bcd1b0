"""The model interface: a request in, an assistant message out, or a stream.

The provider layer knows nothing of the agent loop. A :class:`ModelRequest`
holds canonical messages after the context pipeline; each provider converts
it through the shared rules (:mod:`turnkit.providers.rules`) into its wire
request, and parses the reply back into canonical blocks.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from turnkit._sync import maybe_await
from turnkit.errors import InvalidMessageError
from turnkit.messages import FrozenDict, Message, TextBlock, ThinkingBlock, ToolUseBlock
from turnkit.messages.checks import clean_str, need_str

if TYPE_CHECKING:
    from turnkit.providers.images import ImagePolicy

T = TypeVar("T")

__all__ = [
    "Model",
    "ModelEvent",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputSchema",
    "StopReason",
    "ThinkingReplay",
    "ToolSpec",
    "Usage",
]

StopReason = Literal["end_turn", "tool_use", "max_tokens", "refusal", "stop_sequence", "other"]
"""Why a model stopped, normalised across providers."""

ThinkingReplay = Literal["drop", "text"]
Effort = Literal["low", "medium", "high"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What a model is told about a tool: its name, description and input schema."""

    name: str
    description: str = ""
    input_schema: FrozenDict = field(default_factory=lambda: FrozenDict(type="object"))

    def __post_init__(self) -> None:
        if not clean_str(self.name):
            object.__setattr__(self, "name", need_str(self.name, "name"))
        if not clean_str(self.description):
            object.__setattr__(self, "description", need_str(self.description, "description"))
        if not isinstance(self.input_schema, FrozenDict):
            try:
                schema = FrozenDict(self.input_schema)
            except InvalidMessageError as err:
                raise err.within("input_schema") from None
            object.__setattr__(self, "input_schema", schema)


@dataclass(frozen=True, slots=True)
class ModelSettings:
    """Per-request settings; ``None`` leaves the provider's default.

    ``thinking`` turns on extended reasoning: ``True`` for the provider's
    default, a token budget (int), or an effort ("low", "medium", "high").
    ``thinking_replay`` says what to do with thinking that cannot be replayed
    natively (another provider or model, or no signature): drop it, or send
    it as plain text.
    """

    max_output_tokens: int | None = None
    temperature: float | None = None
    thinking: bool | int | Effort | None = None
    thinking_replay: ThinkingReplay = "drop"
    image_policy: ImagePolicy | None = None  # None: ImagePolicy()

    @property
    def thinking_budget(self) -> int | None:
        """The thinking budget in tokens, or None when thinking is off."""
        thinking = self.thinking
        if thinking is None or thinking is False:
            return None
        if thinking is True:
            return 2048
        if isinstance(thinking, int):
            return thinking
        return {"low": 1024, "medium": 4096, "high": 16384}[thinking]

    @property
    def thinking_effort(self) -> Effort | None:
        """The thinking setting as an effort level, for APIs that take one."""
        budget = self.thinking_budget
        if budget is None:
            return None
        if isinstance(self.thinking, str):
            return self.thinking  # type: ignore[return-value]
        return "low" if budget < 2048 else "medium" if budget < 8192 else "high"


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """The shape a final answer must have: a JSON schema (an object) and its name.

    ``schema`` is closed (``additionalProperties: false`` on every object
    that did not say otherwise), as Anthropic and OpenAI's strict mode
    require. ``strict`` says whether it also meets OpenAI's strict rules
    (every property required), so providers that have a strict mode use it.
    """

    name: str
    schema: FrozenDict
    strict: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.schema, FrozenDict):
            try:
                schema = FrozenDict(self.schema)
            except InvalidMessageError as err:
                raise err.within("schema") from None
            object.__setattr__(self, "schema", schema)


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One call to a model: system text, messages, tools and settings.

    ``messages`` are canonical and have been through ``transform_context``,
    ``convert_to_llm`` and ``normalize_tool_call_history``; system messages
    among them are hoisted into the provider's system field by the rules.
    """

    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    settings: ModelSettings = field(default_factory=ModelSettings)
    output: OutputSchema | None = None
    """When set, the final answer must be JSON matching it: only models whose
    :meth:`Model.takes_output_schema` is true get requests with it."""

    def __post_init__(self) -> None:
        if self.system is not None and not clean_str(self.system):
            object.__setattr__(self, "system", need_str(self.system, "system"))


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a call used; adds up with ``+``.

    ``input_tokens`` is the input neither read from nor written to the
    provider's prompt cache; ``cache_read_tokens`` and ``cache_write_tokens``
    are the cached parts. Each input token is in exactly one of the three,
    whatever the provider reports (see :func:`turnkit.providers.edges.usage`).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        if type(self) is Usage and type(other) is Usage:  # immutable: no new object for nothing
            if not other._any():
                return self
            if not self._any():
                return other
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def _any(self) -> bool:
        return bool(
            self.input_tokens
            or self.output_tokens
            or self.cache_read_tokens
            or self.cache_write_tokens
        )

    @property
    def total_tokens(self) -> int:
        """Every token of the call: input (cached or not) and output."""
        return (
            self.input_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
            + self.output_tokens
        )


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A model's reply: an assistant message (with ``origin``), usage, stop reason."""

    message: Message
    usage: Usage = field(default_factory=Usage)
    stop_reason: StopReason = "end_turn"
    raw_stop_reason: str | None = None

    @property
    def tool_calls(self) -> tuple[ToolUseBlock, ...]:
        return tuple(b for b in self.message.content if type(b) is ToolUseBlock)

    @property
    def text(self) -> str:
        return self.message.text


@dataclass(frozen=True, slots=True)
class ModelEvent:
    """A piece of a streamed reply.

    ``text_delta`` and ``thinking_delta`` carry ``text``; ``tool_use`` carries a
    complete ``tool_call``; ``done`` carries the final ``response``, which is
    the same as a non-streamed call would have returned. Providers that
    stream a call's input give ``tool_input_delta`` first: a piece of its
    JSON text in ``text``, and the call's id and name in ``tool_call`` (its
    ``input`` still empty); the pieces joined are the input's JSON text.
    """

    type: Literal["text_delta", "thinking_delta", "tool_input_delta", "tool_use", "done"]
    text: str = ""
    tool_call: ToolUseBlock | None = None
    response: ModelResponse | None = None


class Model(ABC):
    """A model behind one wire API. Subclasses implement :meth:`request`.

    :meth:`stream` defaults to one request replayed as events; providers
    with a streaming API override it. Both must give the same final message.
    """

    provider: str = "unknown"
    name: str = "unknown"
    context_window: int | None = None
    """How many tokens a request (input and output) may hold; None when unknown.

    Compaction reads it to decide whether a conversation its summariser could
    not shorten may still be sent: unknown counts as fitting, so the
    provider's own error, if any, goes through the normal failure path.
    """

    def takes_output_schema(self, with_tools: bool) -> bool:
        """Whether this model constrains its final answer to ``ModelRequest.output``
        natively (with tools offered in the same request when ``with_tools``).

        When it does not, the agent offers the schema as a tool instead. The
        default is False: a model must say what its API can do.
        """
        return False

    @abstractmethod
    async def request(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` and return the complete reply."""

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        """Send ``request`` and yield the reply as it arrives, ``done`` last."""
        response = await self.request(request)
        for event in events_of(response):
            yield event

    def per_loop(self, make: Callable[[], T]) -> T:
        """``make()`` once per running event loop, then the same value again.

        Async SDK clients pool connections bound to the loop that opened
        them, and the sync twins run each call on a fresh loop, so a client
        must never be shared across loops. Each client is closed on its own
        loop when that loop shuts down (``asyncio.run`` finalizes open async
        generators before closing the loop), so no connection is left for a
        closed loop to clean up ("Event loop is closed").
        """
        import asyncio  # here, not at the top: keeps `import turnkit` fast
        import weakref

        clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any]
        clients = self.__dict__.setdefault("_clients_by_loop", weakref.WeakKeyDictionary())
        loop = asyncio.get_running_loop()
        entry = clients.get(loop)
        if entry is None:
            client = make()
            entry = clients[loop] = (client, _closed_with_loop(client))
        return entry[0]  # type: ignore[no-any-return]

    @property
    def id(self) -> str:
        """``provider:name``, the model string that resolves to this model."""
        return f"{self.provider}:{self.name}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id}>"


def _closed_with_loop(client: Any) -> AsyncGenerator[None, None]:
    """An async generator, started, whose end closes ``client``.

    The running loop tracks it from its first step (``sys`` asyncgen hooks),
    and its shutdown (``loop.shutdown_asyncgens``, run by ``asyncio.run``)
    closes it while the loop still runs.
    """

    async def close_at_loop_end() -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            await _aclose(client)

    closer = close_at_loop_end()
    step = closer.asend(None)  # the loop's first-iteration hook registers it
    with contextlib.suppress(StopIteration):
        step.send(None)
    return closer


async def _aclose(client: Any) -> None:
    """Close an SDK client (``close()`` of openai/anthropic, ``aio.aclose()`` of genai)."""
    aio = getattr(client, "aio", None)
    close = getattr(aio, "aclose", None) or getattr(client, "close", None)
    if close is None:
        return
    with contextlib.suppress(Exception):
        await maybe_await(close())


def events_of(response: ModelResponse) -> list[ModelEvent]:
    """The events a stream of ``response`` would give, ``done`` last."""
    events = []
    for block in response.message.content:
        if isinstance(block, TextBlock) and block.text:
            events.append(ModelEvent("text_delta", text=block.text))
        elif isinstance(block, ThinkingBlock) and block.thinking and not block.redacted:
            events.append(ModelEvent("thinking_delta", text=block.thinking))
        elif isinstance(block, ToolUseBlock):
            events.append(ModelEvent("tool_use", tool_call=block))
    events.append(ModelEvent("done", response=response))
    return events


def settings_from(values: Mapping[str, Any] | None) -> ModelSettings:
    """ModelSettings from keyword values, ignoring the ones left as None."""
    return ModelSettings(**{k: v for k, v in (values or {}).items() if v is not None})
