"""OpenAI Chat Completions over the official ``openai`` SDK (``AsyncOpenAI``).

Also serves OpenAI-compatible servers (Ollama, vLLM, DeepSeek, Qwen, Mistral)
by base URL. Key and base URL come from ``OPENAI_API_KEY`` /
``OPENAI_BASE_URL`` unless given; the SDK retries rate limits and 5xx.

Decisions, where the wire API leaves a choice:

- System text goes in one first ``system`` message for every model: OpenAI
  treats it as ``developer`` for reasoning models (o-series, gpt-5), and
  compatible servers mostly do not know ``developer``.
- Cache marks on text are ignored: Chat Completions caches prompt prefixes
  automatically. Cached tokens are reported as ``cache_read_tokens`` and, as
  for Anthropic, left out of ``input_tokens``.
- Chat has no thinking input. Thinking kept by the replay rules (same
  provider and model) is dropped, unless ``echo_reasoning=True``: then it is
  sent back in the field the server used (``reasoning_content`` for
  DeepSeek/Qwen, ``reasoning`` for Ollama/OpenRouter). Reasoning parsed from a
  reply gets that field name as its ``signature``, so same-model replay works.
- Images and files cannot go in ``tool`` messages: the tool message gets a
  note and they move, labelled, to the front of a following user message.
- PDFs go inline as ``file`` parts. Which files and where (no URL
  documents, no images or files in assistant turns) is decided with every
  other edge case in :mod:`turnkit.providers.edges`.
- ``tool_result.is_error`` has no Chat field; the content is sent as is.
- ``tool_id_style="nine"`` (Mistral-like servers): ids of exactly nine
  alphanumerics, an assistant bridge between tool results and a following
  user message ("Unexpected role 'user' after role 'tool'"), and
  ``max_tokens``. Ollama also gets ``max_tokens``, everyone else
  ``max_completion_tokens``.
- Provider ``"ollama"`` never needs a key: ``OLLAMA_API_KEY`` or a placeholder
  is sent, never ``OPENAI_API_KEY``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import openai

from turnkit.messages import (
    Message,
    Origin,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    thaw,
)
from turnkit.messages.formats.openai_chat import REASONING_FIELDS, chat_user_part
from turnkit.providers._openai_common import json_schema_format, openai_client
from turnkit.providers.base import Model, ModelEvent, ModelRequest, ModelResponse, StopReason, Usage
from turnkit.providers.edges import (
    provider_error,
    refuse,
    sdk_error,
    tool_call,
    transport_errors,
    usage,
)
from turnkit.providers.rules import (
    ToolIdMap,
    nine_char_tool_id,
    openai_chat_tool_id,
    prepare,
)

__all__ = ["OpenAIChatModel"]

PROVIDER = "openai"
TOOL_BRIDGE = "Tool results received."
_STOP: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}

ToolIdStyle = Literal["openai", "nine"]


class OpenAIChatModel(Model):
    """A model behind Chat Completions, e.g. ``OpenAIChatModel("gpt-4.1")``.

    ``tool_id_style="nine"`` serves Mistral-like servers; ``echo_reasoning``
    sends a model's own ``reasoning_content`` back (DeepSeek, Qwen, Kimi in
    tool loops).

    >>> OpenAIChatModel("qwen3", base_url="http://localhost:8000/v1", echo_reasoning=True)
    <OpenAIChatModel openai:qwen3>
    """

    provider = PROVIDER

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        tool_id_style: ToolIdStyle = "openai",
        echo_reasoning: bool = False,
    ) -> None:
        if tool_id_style not in ("openai", "nine"):
            raise ValueError(f"tool_id_style must be 'openai' or 'nine', not {tool_id_style!r}")
        self.name = name
        self.max_retries = max_retries
        self.tool_id_style = tool_id_style
        self.echo_reasoning = echo_reasoning
        self._api_key = api_key
        self._base_url = base_url

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client of the running event loop, built on first use there."""
        return self.per_loop(
            lambda: openai_client(self.provider, self._api_key, self._base_url, self.max_retries)
        )

    async def request(self, request: ModelRequest) -> ModelResponse:
        params = await self.build_params(request)
        try:
            completion = await self.client.chat.completions.create(**params)
        except (openai.APIError, *transport_errors()) as err:
            raise provider_error(err, self.provider, sdk_retries=self.max_retries) from err
        except Exception as err:  # the SDK refused to send it (edges.sdk_error)
            raise sdk_error(err, self.provider) from err
        return self.parse(completion)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        params = await self.build_params(request)
        params.update(stream=True, stream_options={"include_usage": True})
        state = _StreamState()
        try:
            chunks = await self.client.chat.completions.create(**params)
            async with chunks:
                async for chunk in chunks:
                    for event in state.feed(chunk):
                        yield event
        except (openai.APIError, *transport_errors()) as err:
            raise provider_error(err, self.provider, sdk_retries=self.max_retries) from err
        except Exception as err:  # the SDK refused to send it (edges.sdk_error)
            raise sdk_error(err, self.provider) from err
        for event in state.close():
            yield event
        yield ModelEvent("done", response=self._response(state.done))

    # -- request -------------------------------------------------------------

    async def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``chat.completions.create``."""
        system, messages = await prepare(
            request, provider=self.provider, model=self.name, takes_image_urls=True
        )
        nine = self.tool_id_style == "nine"
        ids = ToolIdMap(nine_char_tool_id if nine else openai_chat_tool_id)
        wire = [{"role": "system", "content": system}] if system else []
        wire += _messages(messages, ids, echo=self.echo_reasoning, bridge=nine)
        params: dict[str, Any] = {"model": self.name, "messages": wire}
        if request.tools:
            params["tools"] = [_tool_spec(t) for t in request.tools]
        settings = request.settings
        if settings.max_output_tokens is not None:
            old_style = nine or self.provider == "ollama"
            limit = "max_tokens" if old_style else "max_completion_tokens"
            params[limit] = settings.max_output_tokens
        if settings.temperature is not None:
            params["temperature"] = settings.temperature
        if settings.thinking_effort is not None:
            params["reasoning_effort"] = settings.thinking_effort
        if request.output is not None:
            schema = json_schema_format(request.output)
            params["response_format"] = {"type": "json_schema", "json_schema": schema}
        return params

    def takes_output_schema(self, with_tools: bool) -> bool:
        """``response_format`` json_schema, with or without tools."""
        return True

    # -- reply ---------------------------------------------------------------

    def parse(self, completion: Any) -> ModelResponse:
        """A canonical response from an SDK ``ChatCompletion``."""
        reply = _Reply(usage=completion.usage)
        if completion.choices:
            choice = completion.choices[0]
            message = choice.message
            reply.finish = choice.finish_reason
            reply.text.append(message.content or "")
            reply.refusal.append(message.refusal or "")
            reply.reasoning_field, reasoning = _reasoning_of(message)
            reply.reasoning.append(reasoning)
            for call in message.tool_calls or ():
                function = getattr(call, "function", None)
                if function is not None:
                    reply.add_call(call.id, function.name, function.arguments)
        return self._response(reply)

    def _response(self, reply: _Reply) -> ModelResponse:
        reasoning, text, refusal = map("".join, (reply.reasoning, reply.text, reply.refusal))
        blocks: list[Any] = [ThinkingBlock(reasoning, reply.reasoning_field)] if reasoning else []
        blocks += [TextBlock(part) for part in (text, refusal) if part]
        blocks += reply.calls
        stop = _STOP.get(reply.finish or "", "other")
        if refusal:
            stop = "refusal"
        elif reply.calls and stop == "end_turn":
            stop = "tool_use"  # some compatible servers say "stop" after tool calls
        return ModelResponse(
            Message("assistant", tuple(blocks), origin=Origin(self.provider, self.name)),
            _usage(reply.usage),
            stop,
            reply.finish,
        )


# -- request conversion -------------------------------------------------------


def _tool_spec(tool: Any) -> dict[str, Any]:
    function: dict[str, Any] = {"name": tool.name, "parameters": thaw(tool.input_schema)}
    if tool.description:
        function["description"] = tool.description
    return {"type": "function", "function": function}


def _messages(
    messages: Sequence[Message], ids: ToolIdMap, *, echo: bool, bridge: bool
) -> list[dict[str, Any]]:
    """Canonical messages as Chat messages (``tool`` messages split out of user turns)."""
    wire: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if message.role == "assistant":
            converted = _assistant(message, ids, echo=echo)
            wire += [converted] if converted else []
            continue
        tools, user = _user(message, ids, where=f"messages[{index}]")
        wire += tools
        if user is not None:
            if bridge and wire and wire[-1]["role"] == "tool":
                wire.append({"role": "assistant", "content": TOOL_BRIDGE})
            wire.append(user)
    return wire


def _assistant(message: Message, ids: ToolIdMap, *, echo: bool) -> dict[str, Any] | None:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    reasoning: dict[str, list[str]] = {}
    for block in message.content:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, ToolUseBlock):
            arguments = json.dumps(thaw(block.input))
            function = {"name": block.name, "arguments": arguments}
            calls.append({"id": ids(block.id), "type": "function", "function": function})
        elif isinstance(block, ThinkingBlock):
            if echo and not block.redacted and block.thinking:
                name = block.signature if block.signature in REASONING_FIELDS else None
                reasoning.setdefault(name or REASONING_FIELDS[0], []).append(block.thinking)
        else:
            raise refuse(block, "an assistant message", PROVIDER)
    text = "\n".join(t for t in texts if t)
    if not (text or calls or reasoning):
        return None  # only thinking that Chat cannot take
    out: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        out["tool_calls"] = calls
    for name, parts in reasoning.items():
        out[name] = "\n".join(parts)
    return out


def _user(
    message: Message, ids: ToolIdMap, *, where: str
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Tool messages for the tool results, then the user message (or None)."""
    tools: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for index, block in enumerate(message.content):
        if isinstance(block, ToolResultBlock):
            tool, attachments = _tool_message(block, ids, where=f"{where}.content[{index}]")
            tools.append(tool)
            moved += attachments
        else:
            parts.append(_user_part(block, where=f"{where}.content[{index}]"))
    parts = moved + parts
    if not parts:
        return tools, None
    if len(parts) == 1 and parts[0]["type"] == "text":
        return tools, {"role": message.role, "content": parts[0]["text"]}
    return tools, {"role": message.role, "content": parts}


def _tool_message(
    block: ToolResultBlock, ids: ToolIdMap, *, where: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The ``tool`` message, and attachments that must travel in a user message."""
    call_id = ids(block.tool_use_id)
    if isinstance(block.content, str):
        return {"role": "tool", "tool_call_id": call_id, "content": block.content}, []
    texts = [p.text for p in block.content if isinstance(p, TextBlock)]
    attachments = [
        _user_part(part, where=f"{where}.content[{index}]")
        for index, part in enumerate(block.content)
        if not isinstance(part, TextBlock)
    ]
    if attachments:
        count = len(attachments)
        texts.append(
            f"[{count} attachment{'s' if count > 1 else ''} of this result "
            "follow in the next user message]"
        )
        label = {"type": "text", "text": f"Attachments from tool result {call_id}:"}
        attachments.insert(0, label)
    content = "\n".join(texts)
    return {"role": "tool", "tool_call_id": call_id, "content": content}, attachments


def _user_part(block: Any, *, where: str) -> dict[str, Any]:
    part = chat_user_part(block)  # a file here is a PDF: the rules refused others
    if part is None:
        raise refuse(block, where, PROVIDER)
    return part


# -- reply parsing ----------------------------------------------------------


@dataclass(slots=True)
class _Reply:
    """One reply's parts, gathered from a completion or from stream chunks."""

    text: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    reasoning_field: str | None = None
    calls: list[ToolUseBlock] = field(default_factory=list)
    finish: str | None = None
    usage: Any = None

    def add_call(
        self, call_id: str | None, name: str | None, arguments: str | None
    ) -> ToolUseBlock:
        """Add a tool call; a missing or repeated id gets a fresh one, never a crash."""
        call = tool_call(self.unique_id(call_id), name or "unknown_tool", arguments)
        self.calls.append(call)
        return call

    def unique_id(self, call_id: str | None) -> str:
        """``call_id``, or a fresh id when it is missing or an added call has it."""
        if not call_id or any(c.id == call_id for c in self.calls):
            return "call_" + uuid.uuid4().hex[:24]
        return call_id


def _reasoning_of(message: Any) -> tuple[str | None, str]:
    """The field name and text of reasoning a compatible server sent, if any."""
    extra = getattr(message, "model_extra", None) or {}
    for name in REASONING_FIELDS:
        value = extra.get(name)
        if isinstance(value, str) and value:
            return name, value
    return None, ""


def _usage(counts: Any) -> Usage:
    if counts is None:
        return Usage()
    details = getattr(counts, "prompt_tokens_details", None)
    return usage(
        input_tokens=counts.prompt_tokens,
        output_tokens=counts.completion_tokens,
        cache_read=getattr(details, "cached_tokens", None),
        input_includes_cache=True,
    )


# -- streaming --------------------------------------------------------------


@dataclass(slots=True)
class _OpenCall:
    """A streamed tool call still receiving argument fragments.

    ``opened`` is the call as its ``tool_input_delta`` events carry it (input
    empty), set once the id and name are known (the first fragment, from
    OpenAI): its id is the one the whole call gets. ``sent`` counts the
    fragments those events have carried.
    """

    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)
    opened: ToolUseBlock | None = None
    sent: int = 0


class _StreamState:
    """Gathers chunks into a :class:`_Reply`, yielding events as parts arrive."""

    def __init__(self) -> None:
        self.open: dict[int, _OpenCall] = {}
        self.done = _Reply()

    def feed(self, chunk: Any) -> list[ModelEvent]:
        """The events one ``chat.completion.chunk`` gives."""
        if getattr(chunk, "usage", None) is not None:
            self.done.usage = chunk.usage
        events: list[ModelEvent] = []
        for choice in chunk.choices or ():
            if choice.index != 0:
                continue
            delta = choice.delta
            if delta is not None:
                events += self._delta(delta)
            if choice.finish_reason:
                self.done.finish = choice.finish_reason
                events += self.close()
        return events

    def _delta(self, delta: Any) -> list[ModelEvent]:
        events: list[ModelEvent] = []
        name, reasoning = _reasoning_of(delta)
        done = self.done
        if reasoning:
            done.reasoning_field = done.reasoning_field or name
            done.reasoning.append(reasoning)
            events.append(ModelEvent("thinking_delta", text=reasoning))
        if delta.content:
            done.text.append(delta.content)
            events.append(ModelEvent("text_delta", text=delta.content))
        if delta.refusal:
            done.refusal.append(delta.refusal)
        for fragment in delta.tool_calls or ():
            events += self._fragment(fragment)
        return events

    def _fragment(self, fragment: Any) -> list[ModelEvent]:
        index = fragment.index if fragment.index is not None else max(self.open, default=0)
        events: list[ModelEvent] = []
        call = self.open.get(index)
        if call is None or (fragment.id and call.id and fragment.id != call.id):
            # A new call: earlier ones are complete (servers send calls in order).
            events = self.close()
            call = self.open[index] = _OpenCall()
        call.id = call.id or fragment.id
        function = fragment.function
        if function is not None:
            call.name = call.name or function.name
            if function.arguments:
                call.arguments.append(function.arguments)
        return events + self._input_delta(call)

    def _input_delta(self, call: _OpenCall) -> list[ModelEvent]:
        """The fragments not yet given, once the call's id and name are known."""
        if call.opened is None:
            if not (call.id and call.name):
                return []  # held: a call that never says both is given whole only
            call.opened = ToolUseBlock(self.done.unique_id(call.id), call.name, {})
        text = "".join(call.arguments[call.sent :])
        call.sent = len(call.arguments)
        return [ModelEvent("tool_input_delta", text=text, tool_call=call.opened)] if text else []

    def close(self) -> list[ModelEvent]:
        """Complete every open tool call, in index order."""
        events = []
        for index in sorted(self.open):
            call = self.open.pop(index)
            # An opened call keeps its id: it was unique then, and only this one was open.
            call_id = call.opened.id if call.opened is not None else call.id
            block = self.done.add_call(call_id, call.name, "".join(call.arguments))
            events.append(ModelEvent("tool_use", tool_call=block))
        return events
