"""Anthropic Messages API over the official ``anthropic`` SDK.

Key and base URL come from ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``
unless given. The SDK retries rate limits, overload and 5xx with backoff,
honouring ``retry-after`` (see the README on retries). Edge cases are decided
in :mod:`turnkit.providers.edges`, as for every provider.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anthropic

from turnkit.messages import (
    Base64Source,
    FileBlock,
    ImageBlock,
    Message,
    Origin,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    thaw,
)
from turnkit.providers.base import Model, ModelEvent, ModelRequest, ModelResponse, StopReason
from turnkit.providers.edges import (
    file_media_type,
    provider_error,
    sdk_error,
    tool_call,
    transport_errors,
    usage,
)
from turnkit.providers.rules import ToolIdMap, anthropic_tool_id, prepare

__all__ = ["AnthropicModel"]

PROVIDER = "anthropic"
MAX_CACHE_MARKS = 4
_STOP: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
}


class AnthropicModel(Model):
    """A Claude model, e.g. ``AnthropicModel("claude-sonnet-4-5")``."""

    provider = PROVIDER

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
        default_max_tokens: int = 4096,
    ) -> None:
        self.name = name
        self.max_retries = max_retries
        self.default_max_tokens = default_max_tokens
        self._client_args = {"api_key": api_key, "base_url": base_url, "max_retries": max_retries}

    @property
    def client(self) -> anthropic.AsyncAnthropic:
        """The SDK client of the running event loop."""
        args = {k: v for k, v in self._client_args.items() if v is not None}
        return self.per_loop(lambda: anthropic.AsyncAnthropic(**args))

    async def request(self, request: ModelRequest) -> ModelResponse:
        params = await self.build_params(request)
        try:
            reply = await self.client.messages.create(**params)
        except (anthropic.APIError, *transport_errors()) as err:
            raise provider_error(err, PROVIDER, sdk_retries=self.max_retries) from err
        except Exception as err:  # the SDK refused to send it (edges.sdk_error)
            raise sdk_error(err, PROVIDER) from err
        return self.parse(reply)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        params = await self.build_params(request)
        opened: dict[int, ToolUseBlock] = {}  # tool_use blocks by index, input still empty
        try:
            async with self.client.messages.stream(**params) as stream:
                async for event in stream:
                    out = _stream_event(event, opened)
                    if out is not None:
                        yield out
                final = await stream.get_final_message()
        except (anthropic.APIError, *transport_errors()) as err:
            raise provider_error(err, PROVIDER, sdk_retries=self.max_retries) from err
        except Exception as err:  # the SDK refused to send it (edges.sdk_error)
            raise sdk_error(err, PROVIDER) from err
        yield ModelEvent("done", response=self.parse(final))

    # -- request -------------------------------------------------------------

    async def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``messages.create``."""
        system, messages = await prepare(
            request, provider=PROVIDER, model=self.name, takes_image_urls=True
        )
        ids = ToolIdMap(anthropic_tool_id)
        wire = _merge_turns(_message(m, ids) for m in messages)
        _limit_cache_marks(wire)
        settings = request.settings
        budget = settings.thinking_budget
        if budget is not None and not _thinking_can_continue(wire):
            budget = None  # the open tool turn was written without signed thinking
        max_tokens = settings.max_output_tokens or self.default_max_tokens
        params: dict[str, Any] = {"model": self.name, "messages": wire, "max_tokens": max_tokens}
        if budget is not None:
            budget = max(budget, 1024)
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
            params["max_tokens"] = max(max_tokens, budget + 1024)
        if system:
            params["system"] = system
        if settings.temperature is not None:
            params["temperature"] = settings.temperature
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": thaw(t.input_schema)}
                for t in request.tools
            ]
        if request.output is not None:
            schema = {"type": "json_schema", "schema": thaw(request.output.schema)}
            params["output_config"] = {"format": schema}
        return params

    def takes_output_schema(self, with_tools: bool) -> bool:
        """Structured outputs (``output_config.format``): Claude 4.5 and later;
        the Claude 3 family has none, so the agent falls back to a tool there."""
        return not self.name.startswith("claude-3")

    # -- reply ---------------------------------------------------------------

    def parse(self, reply: Any) -> ModelResponse:
        """A canonical response from an SDK ``Message``."""
        blocks: list[Any] = []
        for block in reply.content:
            if block.type == "text":
                blocks.append(TextBlock(block.text))
            elif block.type == "thinking":
                blocks.append(ThinkingBlock(block.thinking, block.signature or None))
            elif block.type == "redacted_thinking":
                blocks.append(ThinkingBlock("", block.data, redacted=True))
            elif block.type == "tool_use":
                blocks.append(_tool_use(block))
        counts = reply.usage
        return ModelResponse(
            Message("assistant", tuple(blocks), origin=Origin(PROVIDER, self.name)),
            usage(
                input_tokens=counts.input_tokens,
                output_tokens=counts.output_tokens,
                cache_read=getattr(counts, "cache_read_input_tokens", None),
                cache_write=getattr(counts, "cache_creation_input_tokens", None),
                input_includes_cache=False,
            ),
            _STOP.get(reply.stop_reason or "", "other"),
            reply.stop_reason,
        )


def _tool_use(block: Any) -> ToolUseBlock:
    return tool_call(block.id, block.name, block.input)


def _stream_event(event: Any, opened: dict[int, ToolUseBlock]) -> ModelEvent | None:
    """The ModelEvent one SDK stream event gives, if any.

    A tool_use block's input arrives as ``input_json_delta`` pieces of its
    JSON text; each goes out with the call's id and name (``opened``, from
    the block's start), the whole call once the block stops.
    """
    kind = event.type
    if kind == "text":
        return ModelEvent("text_delta", text=event.text)
    if kind == "thinking":
        return ModelEvent("thinking_delta", text=event.thinking)
    if kind == "content_block_start" and event.content_block.type == "tool_use":
        block = event.content_block
        opened[event.index] = ToolUseBlock(block.id, block.name, {})
    elif kind == "content_block_delta" and event.delta.type == "input_json_delta":
        call = opened.get(event.index)
        if call is not None and event.delta.partial_json:
            return ModelEvent("tool_input_delta", text=event.delta.partial_json, tool_call=call)
    elif kind == "content_block_stop" and event.content_block.type == "tool_use":
        opened.pop(event.index, None)
        return ModelEvent("tool_use", tool_call=_tool_use(event.content_block))
    return None


def _merge_turns(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One wire message per run of same-role messages, as the API reads them."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1]["content"].extend(message["content"])
        else:
            merged.append(message)
    return merged


def _message(message: Message, ids: ToolIdMap) -> dict[str, Any]:
    return {"role": message.role, "content": [_block(b, ids) for b in message.content]}


def _block(block: Any, ids: ToolIdMap) -> dict[str, Any]:
    if isinstance(block, TextBlock):
        out: dict[str, Any] = {"type": "text", "text": block.text}
        if block.cache is not None:
            out["cache_control"] = {"type": "ephemeral", **block.cache.to_dict()}
        return out
    if isinstance(block, ImageBlock):
        return {"type": "image", "source": block.source.to_dict()}
    if isinstance(block, FileBlock):
        return _document(block)
    if isinstance(block, ThinkingBlock):
        if block.redacted:
            return {"type": "redacted_thinking", "data": block.signature}
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if isinstance(block, ToolUseBlock):
        return {
            "type": "tool_use",
            "id": ids(block.id),
            "name": block.name,
            "input": thaw(block.input),
        }
    return _tool_result(block, ids)


def _tool_result(block: ToolResultBlock, ids: ToolIdMap) -> dict[str, Any]:
    content: Any = block.content
    if not isinstance(content, str):
        content = [_block(part, ids) for part in content]
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": ids(block.tool_use_id)}
    if content:
        out["content"] = content
    if block.is_error:
        out["is_error"] = True
    return out


def _document(block: FileBlock) -> dict[str, Any]:
    """A PDF (inline or URL) or an inline text file; the rules refused the rest."""
    source = block.source
    wire: dict[str, Any]
    if not isinstance(source, Base64Source):
        wire = {"type": "url", "url": source.url}
    elif file_media_type(block).startswith("text/"):
        text = base64.b64decode(source.data).decode("utf-8", errors="replace")
        wire = {"type": "text", "media_type": "text/plain", "data": text}
    else:
        wire = {"type": "base64", "media_type": "application/pdf", "data": source.data}
    return {"type": "document", "source": wire, "title": block.filename}


def _limit_cache_marks(wire: list[dict[str, Any]]) -> None:
    """Keep the last four cache breakpoints: the API refuses more."""
    marked = [b for m in wire for b in m["content"] if "cache_control" in b]
    for block in marked[:-MAX_CACHE_MARKS]:
        del block["cache_control"]


def _thinking_can_continue(wire: list[dict[str, Any]]) -> bool:
    """With thinking on, an open tool turn must start with a thinking block."""
    start = None
    for index in range(len(wire) - 1, -1, -1):
        message = wire[index]
        if message["role"] == "assistant":
            start = index
        elif not any(b["type"] == "tool_result" for b in message["content"]):
            break
    if start is None or not any(b["type"] == "tool_result" for b in wire[-1]["content"]):
        return True
    first = wire[start]["content"][0]["type"] if wire[start]["content"] else None
    return first in ("thinking", "redacted_thinking")
