"""OpenAI Responses API over the official ``openai`` SDK (``client.responses``).

Key and base URL come from ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL`` unless
given. The SDK retries rate limits and 5xx with backoff. Requests are
stateless by default (``store=False``): the history is ours and is sent in
full every time, never by ``previous_response_id``.

Canonical mapping (output items to blocks, and back):

- A ``message`` item gives one :class:`TextBlock` per ``output_text`` part (a
  ``refusal`` part also becomes text, and the stop reason ``refusal``).
  Consecutive text blocks go back as one assistant message item.
- A ``function_call`` item gives a :class:`ToolUseBlock` whose id is the
  ``call_id``; the ``fc_…`` item id is not kept there, so the ids stay clean
  for every other provider.
- A ``reasoning`` item gives a :class:`ThinkingBlock`: ``thinking`` is the
  summary (parts joined by a blank line) and ``signature`` is the JSON object
  ``{"id": "rs_…", "encrypted_content": "…", "next_type": "function_call",
  "next_id": "fc_…"}`` (``next_*`` name the output item that came right after
  it, e.g. a ``message`` and its ``msg_…`` id). The API ties a reasoning item
  to the item that followed it, by id, so the follower's id travels with the
  reasoning: on replay the reasoning item goes right before the block that
  followed it, and only then does that item get its original id back; when
  that block is gone or of another kind, the reasoning item is left out.
  With ``store=False`` a reasoning item without ``encrypted_content`` cannot
  be replayed, so it gets no signature (the shared rule drops it, or sends it
  as text with ``thinking_replay="text"``).

User content: images go as ``input_image`` (the URL, or a ``data:`` URL for
base64), PDFs as ``input_file`` (``file_data`` as a data URL with the
filename, or ``file_url``). A tool result is a string, or a list of input
parts when it holds images or files. An assistant message cannot carry
images or files on this API: :mod:`turnkit.providers.edges` refuses them,
with other file types, before anything is sent.

Replay never sends a reasoning item without its following item, never sends
an ``fc_``/``msg_`` id without the reasoning item before it, and never sends an
item id twice. ``encrypted_content`` is requested (``include``) whenever
thinking is on; it is not requested otherwise, since models without reasoning
refuse it. Usage follows the Anthropic provider: ``input_tokens`` counts the
uncached input and ``cache_read_tokens`` the cached part. Text ``cache`` marks
are ignored (OpenAI caches prefixes by itself). A tool result has no error flag
on this API; its text is sent as it is.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import openai

from turnkit.errors import ProviderError
from turnkit.messages import (
    Message,
    Origin,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    thaw,
)
from turnkit.messages.formats.openai_responses import (
    reasoning_signature,
    reasoning_state,
    responses_input_part,
)
from turnkit.providers._openai_common import json_schema_format, openai_client
from turnkit.providers.base import (
    Model,
    ModelEvent,
    ModelRequest,
    ModelResponse,
    StopReason,
    ThinkingReplay,
    Usage,
)
from turnkit.providers.edges import (
    failure_reported,
    provider_error,
    refuse,
    sdk_error,
    tool_call,
    transport_errors,
    usage,
)
from turnkit.providers.rules import ToolIdMap, prepare, responses_call_id

__all__ = ["OpenAIResponsesModel"]

PROVIDER = "openai-responses"
ENCRYPTED_REASONING = "reasoning.encrypted_content"
_INCOMPLETE: dict[str, StopReason] = {
    "max_output_tokens": "max_tokens",
    "content_filter": "refusal",
}
_FINAL_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})


class OpenAIResponsesModel(Model):
    """An OpenAI model behind the Responses API, e.g. ``OpenAIResponsesModel("gpt-5")``.

    ``store=False`` (the default) keeps nothing on OpenAI's side; reasoning is
    then replayed from its ``encrypted_content``. ``store=True`` also lets
    reasoning be replayed by id alone.
    """

    provider = PROVIDER

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        store: bool = False,
    ) -> None:
        self.name = name
        self.max_retries = max_retries
        self.store = store
        self._api_key = api_key
        self._base_url = base_url

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client of the running event loop."""
        return self.per_loop(
            lambda: openai_client(PROVIDER, self._api_key, self._base_url, self.max_retries)
        )

    async def request(self, request: ModelRequest) -> ModelResponse:
        params = await self.build_params(request)
        try:
            reply = await self.client.responses.create(**params)
        except (openai.APIError, *transport_errors()) as err:
            raise provider_error(err, PROVIDER, sdk_retries=self.max_retries) from err
        except Exception as err:  # the SDK refused to send it (edges.sdk_error)
            raise sdk_error(err, PROVIDER) from err
        return self.parse(reply)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        params = await self.build_params(request)
        final = failure = None
        calls = _StreamedCalls()
        try:
            events = await self.client.responses.create(**params, stream=True)
            async with events:
                async for event in events:
                    if event.type in _FINAL_EVENTS:
                        final = event.response
                    elif event.type == "error":
                        failure = failure_reported(event.message, event.code, PROVIDER)
                        break
                    elif (out := _stream_event(event, calls)) is not None:
                        yield out
        except (openai.APIError, *transport_errors()) as err:
            raise provider_error(err, PROVIDER, sdk_retries=self.max_retries) from err
        except Exception as err:  # the SDK refused to send it (edges.sdk_error)
            raise sdk_error(err, PROVIDER) from err
        if failure is not None:
            raise failure
        if final is None:
            message = "the response stream ended before the response was complete"
            raise ProviderError(message, provider=PROVIDER, retryable=True)
        yield ModelEvent("done", response=self.parse(final))

    # -- request -------------------------------------------------------------

    async def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``responses.create``."""
        system, messages = await prepare(
            request, provider=PROVIDER, model=self.name, takes_image_urls=True
        )
        settings = request.settings
        builder = _InputBuilder(self.store, settings.thinking_replay)
        params: dict[str, Any] = {
            "model": self.name,
            "input": builder.items(messages),
            "store": self.store,
        }
        if system:
            params["instructions"] = system
        if settings.max_output_tokens is not None:
            params["max_output_tokens"] = settings.max_output_tokens
        if settings.temperature is not None:
            params["temperature"] = settings.temperature
        if settings.thinking_effort is not None:
            params["reasoning"] = {"effort": settings.thinking_effort, "summary": "auto"}
            params["include"] = [ENCRYPTED_REASONING]
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": thaw(t.input_schema),
                    "strict": False,
                }
                for t in request.tools
            ]
        if request.output is not None:
            text_format = {"type": "json_schema", **json_schema_format(request.output)}
            params["text"] = {"format": text_format}
        return params

    def takes_output_schema(self, with_tools: bool) -> bool:
        """``text.format`` json_schema, with or without tools."""
        return True

    # -- reply ---------------------------------------------------------------

    def parse(self, reply: Any) -> ModelResponse:
        """A canonical response from an SDK ``Response``."""
        if reply.status == "failed":
            error = reply.error
            message, code = getattr(error, "message", None), getattr(error, "code", None)
            raise failure_reported(message, code, PROVIDER)
        blocks: list[Any] = []
        refused = False
        output = list(reply.output or [])
        for index, item in enumerate(output):
            if item.type == "reasoning":
                following = output[index + 1] if index + 1 < len(output) else None
                thinking = self._thinking(item, following)
                if thinking is not None:
                    blocks.append(thinking)
            elif item.type == "message":
                for part in item.content:
                    if part.type == "output_text":
                        blocks.append(TextBlock(part.text))
                    elif part.type == "refusal":
                        blocks.append(TextBlock(part.refusal))
                        refused = True
            elif item.type == "function_call":
                blocks.append(_tool_use(item))
        stop, raw = _stop_reason(reply, blocks, refused)
        return ModelResponse(
            Message("assistant", tuple(blocks), origin=Origin(PROVIDER, self.name)),
            _usage(reply.usage),
            stop,
            raw,
        )

    def _thinking(self, item: Any, following: Any) -> ThinkingBlock | None:
        text = "\n\n".join(part.text for part in item.summary or () if part.text)
        encrypted = getattr(item, "encrypted_content", None)
        signature = None
        if encrypted or self.store:
            signature = reasoning_signature(
                item.id,
                encrypted,
                following.type if following is not None else None,
                getattr(following, "id", None) if following is not None else None,
            )
        if not text and signature is None:
            return None  # nothing to show and nothing to replay
        return ThinkingBlock(text, signature)


# -- conversion ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Reasoning:
    """A reasoning item ready to replay, and what must follow it."""

    item: dict[str, Any]
    next_type: str | None
    next_id: str | None


class _InputBuilder:
    """Turns prepared canonical messages into Responses ``input`` items."""

    def __init__(self, store: bool, mode: ThinkingReplay) -> None:
        self.store = store
        self.mode = mode
        self.ids = ToolIdMap(responses_call_id)
        self.seen: set[str] = set()  # item ids already sent: the API refuses duplicates

    def items(self, messages: tuple[Message, ...]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for message in messages:
            if message.role == "assistant":
                out.extend(self._assistant(message))
            else:
                out.extend(self._user(message))
        return out

    def _user(self, message: Message) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        parts: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": self.ids(block.tool_use_id),
                        "output": _tool_output(block),
                    }
                )
            else:
                parts.append(_input_part(block))
        if parts:
            items.append({"type": "message", "role": "user", "content": parts})
        return items

    def _assistant(self, message: Message) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        pending: _Reasoning | None = None
        for block in message.content:
            if isinstance(block, ThinkingBlock):
                replay = self._replayable(block)
                if isinstance(replay, _Reasoning):
                    pending = replay  # an earlier one with no follower of its own is dropped
                elif replay is not None:
                    self._add(items, _assistant_text(replay), None)
                continue
            if isinstance(block, ToolUseBlock):
                item = {
                    "type": "function_call",
                    "call_id": self.ids(block.id),
                    "name": block.name,
                    "arguments": json.dumps(thaw(block.input)),
                }
            elif isinstance(block, TextBlock):
                item = _assistant_text(block)
            else:
                raise refuse(block, "an assistant message", PROVIDER)
            self._add(items, item, pending)
            pending = None
        return items

    def _add(
        self, items: list[dict[str, Any]], item: dict[str, Any], reasoning: _Reasoning | None
    ) -> None:
        """Append ``item``, after ``reasoning`` when that may precede it."""
        if reasoning is not None and self._claim(reasoning, item["type"]):
            items.append(reasoning.item)
            if reasoning.next_id:
                item = {"id": reasoning.next_id, **item}
        elif item["type"] == "message" and items and items[-1]["type"] == "message":
            items[-1]["content"].extend(item["content"])
            return
        items.append(item)

    def _replayable(self, block: ThinkingBlock) -> _Reasoning | TextBlock | None:
        """The reasoning item for a native block, or its text fallback, or nothing."""
        state = reasoning_state(block.signature)
        usable = state is not None and (self.store or bool(state.get("encrypted_content")))
        if state is not None and usable:
            item: dict[str, Any] = {
                "type": "reasoning",
                "id": state["id"],
                "summary": [{"type": "summary_text", "text": block.thinking}]
                if block.thinking
                else [],
            }
            if state.get("encrypted_content"):
                item["encrypted_content"] = state["encrypted_content"]
            return _Reasoning(item, state.get("next_type"), state.get("next_id"))
        if self.mode == "text" and not block.redacted and block.thinking.strip():
            return TextBlock(f"<thinking>\n{block.thinking}\n</thinking>")
        return None

    def _claim(self, reasoning: _Reasoning, kind: str) -> bool:
        """Reserve ``reasoning`` (and its follower's id) for a place before ``kind``."""
        if reasoning.next_type != kind:
            return False  # the API ties reasoning to the very item that followed it
        taken = [reasoning.item["id"], *([reasoning.next_id] if reasoning.next_id else [])]
        if any(item_id in self.seen for item_id in taken):
            return False
        self.seen.update(taken)
        return True


def _assistant_text(block: TextBlock) -> dict[str, Any]:
    text = {"type": "output_text", "text": block.text, "annotations": []}
    return {"type": "message", "role": "assistant", "content": [text]}


def _input_part(block: Any) -> dict[str, Any]:
    part = responses_input_part(block)  # a file here is a PDF: the rules refused others
    if part is None:
        raise refuse(block, "a user message", PROVIDER)
    return part


def _tool_output(block: ToolResultBlock) -> str | list[dict[str, Any]]:
    """A string, or input parts when the result carries images or files."""
    content = block.content
    if isinstance(content, str):
        return content
    if all(isinstance(part, TextBlock) for part in content):
        return "\n".join(part.text for part in content)  # type: ignore[union-attr]
    return [_input_part(p) for p in content]


# -- reply --------------------------------------------------------------------


def _tool_use(item: Any) -> ToolUseBlock:
    return tool_call(item.call_id, item.name, item.arguments)


def _stop_reason(reply: Any, blocks: list[Any], refused: bool) -> tuple[StopReason, str | None]:
    status = reply.status
    if status == "incomplete":
        reason = getattr(reply.incomplete_details, "reason", None)
        return _INCOMPLETE.get(reason or "", "other"), reason
    if status not in (None, "completed"):
        return "other", status
    if any(isinstance(b, ToolUseBlock) for b in blocks):
        return "tool_use", status
    return ("refusal" if refused else "end_turn"), status


def _usage(counts: Any) -> Usage:
    if counts is None:
        return Usage()
    details = getattr(counts, "input_tokens_details", None)
    return usage(
        input_tokens=counts.input_tokens,
        output_tokens=counts.output_tokens,
        cache_read=getattr(details, "cached_tokens", None),
        input_includes_cache=True,
    )


@dataclass(slots=True)
class _StreamedCalls:
    """Function calls whose arguments are streaming, as their pieces carry them
    (the ``call_id`` and name, input empty): by item id, and by output index
    for a piece whose item id was not seen."""

    by_item: dict[str, ToolUseBlock] = field(default_factory=dict)
    by_index: dict[int, ToolUseBlock] = field(default_factory=dict)

    def open(self, output_index: int, item: Any) -> None:
        if not (item.call_id and item.name):
            return  # nothing to name the pieces by: the call is given whole only
        call = ToolUseBlock(item.call_id, item.name, {})
        self.by_index[output_index] = call
        if item.id:
            self.by_item[item.id] = call

    def find(self, item_id: str | None, output_index: int) -> ToolUseBlock | None:
        call = self.by_item.get(item_id) if item_id else None
        return call if call is not None else self.by_index.get(output_index)


def _stream_event(event: Any, calls: _StreamedCalls) -> ModelEvent | None:
    kind = event.type
    if kind in ("response.output_text.delta", "response.refusal.delta"):
        return ModelEvent("text_delta", text=event.delta)
    if kind == "response.reasoning_summary_text.delta":
        return ModelEvent("thinking_delta", text=event.delta)
    if kind == "response.reasoning_summary_part.added" and event.summary_index > 0:
        return ModelEvent("thinking_delta", text="\n\n")  # parts are joined by a blank line
    if kind == "response.output_item.added" and event.item.type == "function_call":
        calls.open(event.output_index, event.item)
    elif kind == "response.function_call_arguments.delta":
        call = calls.find(event.item_id, event.output_index)
        if call is not None and event.delta:
            return ModelEvent("tool_input_delta", text=event.delta, tool_call=call)
    elif kind == "response.output_item.done" and event.item.type == "function_call":
        return ModelEvent("tool_use", tool_call=_tool_use(event.item))
    return None


# -- errors -------------------------------------------------------------------
