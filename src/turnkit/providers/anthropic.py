"""Anthropic Messages API over the official ``anthropic`` SDK.

Key and base URL come from ``ANTHROPIC_API_KEY`` / ``ANTHROPIC_BASE_URL``
unless given. The SDK retries rate limits, overload and 5xx with backoff.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterable
from typing import Any

import anthropic

from turnkit.errors import ProviderError, UnsupportedContentError
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
)
from turnkit.providers.base import Model, ModelEvent, ModelRequest, ModelResponse, StopReason, Usage
from turnkit.providers.rules import (
    ToolIdMap,
    anthropic_tool_id,
    is_retryable_status,
    prepare,
    retry_after_seconds,
)

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
        except anthropic.APIError as err:
            raise _provider_error(err) from err
        return self.parse(reply)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        params = await self.build_params(request)
        try:
            async with self.client.messages.stream(**params) as stream:
                async for event in stream:
                    if event.type == "text":
                        yield ModelEvent("text_delta", text=event.text)
                    elif event.type == "thinking":
                        yield ModelEvent("thinking_delta", text=event.thinking)
                    elif (
                        event.type == "content_block_stop"
                        and event.content_block.type == "tool_use"
                    ):
                        yield ModelEvent("tool_use", tool_call=_tool_use(event.content_block))
                final = await stream.get_final_message()
        except anthropic.APIError as err:
            raise _provider_error(err) from err
        yield ModelEvent("done", response=self.parse(final))

    # -- request -------------------------------------------------------------

    async def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``messages.create``."""
        system, messages = await prepare(
            request, provider=PROVIDER, model=self.name, takes_image_urls=True
        )
        ids = ToolIdMap(anthropic_tool_id)
        wire = _merge_turns(m for m in (_message(m, ids) for m in messages) if m["content"])
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
                {"name": t.name, "description": t.description, "input_schema": t.input_schema}
                for t in request.tools
            ]
        return params

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
        usage = reply.usage
        return ModelResponse(
            Message("assistant", tuple(blocks), origin=Origin(PROVIDER, self.name)),
            Usage(
                usage.input_tokens or 0,
                usage.output_tokens or 0,
                getattr(usage, "cache_read_input_tokens", None) or 0,
                getattr(usage, "cache_creation_input_tokens", None) or 0,
            ),
            _STOP.get(reply.stop_reason or "", "other"),
            reply.stop_reason,
        )


def _tool_use(block: Any) -> ToolUseBlock:
    return ToolUseBlock(block.id, block.name, block.input if isinstance(block.input, dict) else {})


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
    content = [b for b in (_block(b, ids) for b in message.content) if b is not None]
    return {"role": message.role, "content": content}


def _block(block: Any, ids: ToolIdMap) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        if not block.text.strip():
            return None  # refused by the API ("text content blocks must be non-empty")
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
        return {"type": "tool_use", "id": ids(block.id), "name": block.name, "input": block.input}
    return _tool_result(block, ids)


def _tool_result(block: ToolResultBlock, ids: ToolIdMap) -> dict[str, Any]:
    content: Any = block.content
    if not isinstance(content, str):
        content = [b for b in (_block(part, ids) for part in content) if b is not None]
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": ids(block.tool_use_id)}
    if content:
        out["content"] = content
    if block.is_error:
        out["is_error"] = True
    return out


def _document(block: FileBlock) -> dict[str, Any]:
    source = block.source
    media_type = source.media_type or "application/pdf"
    if media_type == "application/pdf":
        wire = (
            source.to_dict()
            if isinstance(source, Base64Source)
            else {"type": "url", "url": source.url}
        )
    elif media_type.startswith("text/") and isinstance(source, Base64Source):
        text = base64.b64decode(source.data).decode("utf-8", errors="replace")
        wire = {"type": "text", "media_type": "text/plain", "data": text}
    else:
        raise UnsupportedContentError(
            f"Anthropic takes PDF and plain-text documents, not {media_type} ({block.filename})",
            provider=PROVIDER,
        )
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


def _provider_error(err: anthropic.APIError) -> ProviderError:
    if isinstance(err, anthropic.APIStatusError):
        body = err.body if isinstance(err.body, dict) else {}
        detail = body.get("error", {}) if isinstance(body.get("error"), dict) else {}
        message = detail.get("message") or err.message
        return ProviderError(
            message,
            provider=PROVIDER,
            status=err.status_code,
            retryable=is_retryable_status(err.status_code),
            retry_after=retry_after_seconds(err.response.headers),
        )
    return ProviderError(str(err), provider=PROVIDER, retryable=True)
