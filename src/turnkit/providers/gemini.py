"""Gemini API over the official ``google-genai`` SDK.

Key from ``GEMINI_API_KEY`` / ``GOOGLE_API_KEY`` and base URL from
``GOOGLE_GEMINI_BASE_URL`` unless given.

Canonical mapping of thought signatures: a thought part becomes a
ThinkingBlock with its text and signature; a signature on any other part
(a function call or text) becomes an empty, signed ThinkingBlock right
before that block. On replay to the same model the signature goes back on
the part it came with. Calls without a signature of their own (history from
another model) get the documented placeholder, so Gemini 3 accepts them.

Images and files may sit in model turns too (image models write them).
Other edge cases are decided in :mod:`turnkit.providers.edges`.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator
from typing import Any

from google import genai
from google.genai import errors, types

from turnkit.messages import (
    Base64Source,
    FileBlock,
    Message,
    Origin,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    thaw,
)
from turnkit.messages.formats.gemini import SKIP_SIGNATURE
from turnkit.providers.base import Model, ModelEvent, ModelRequest, ModelResponse, StopReason, Usage
from turnkit.providers.edges import (
    file_media_type,
    provider_error,
    refuse,
    sdk_error,
    tool_call,
    transport_errors,
    usage,
)
from turnkit.providers.rules import prepare

__all__ = ["SKIP_SIGNATURE", "GeminiModel"]

PROVIDER = "gemini"
_RETRY_STATUSES = [408, 409, 429, 500, 501, 502, 503, 504]
_REFUSALS = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"}


class GeminiModel(Model):
    """A Gemini model, e.g. ``GeminiModel("gemini-2.5-flash")``."""

    provider = PROVIDER

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 2,
    ) -> None:
        self.name = name
        self.max_retries = max_retries
        self._api_key = api_key
        # The SDK retries the statuses every provider calls retryable (edges).
        retry = types.HttpRetryOptions(attempts=max_retries + 1, http_status_codes=_RETRY_STATUSES)
        self._options = types.HttpOptions(base_url=base_url, retry_options=retry)

    @property
    def client(self) -> genai.Client:
        """The SDK client of the running event loop."""
        return self.per_loop(
            lambda: genai.Client(api_key=self._api_key, http_options=self._options)
        )

    async def request(self, request: ModelRequest) -> ModelResponse:
        params = await self.build_params(request)
        try:
            reply = await self.client.aio.models.generate_content(**params)
        except (errors.APIError, *transport_errors()) as err:
            raise provider_error(err, PROVIDER, sdk_retries=self.max_retries) from err
        except Exception as err:  # the SDK refused to send it (edges.sdk_error)
            raise sdk_error(err, PROVIDER) from err
        candidate = reply.candidates[0] if reply.candidates else None
        parts = list(candidate.content.parts or []) if candidate and candidate.content else []
        return self.parse(parts, candidate, reply.usage_metadata)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        params = await self.build_params(request)
        parts: list[Any] = []
        candidate = usage = None
        try:
            async for chunk in await self.client.aio.models.generate_content_stream(**params):
                usage = chunk.usage_metadata or usage
                if not chunk.candidates:
                    continue
                candidate = chunk.candidates[0]
                for part in (candidate.content.parts or []) if candidate.content else []:
                    parts.append(part)
                    if part.text and not part.function_call:
                        kind = "thinking_delta" if part.thought else "text_delta"
                        yield ModelEvent(kind, text=part.text)
        except (errors.APIError, *transport_errors()) as err:
            raise provider_error(err, PROVIDER, sdk_retries=self.max_retries) from err
        except Exception as err:  # the SDK refused to send it (edges.sdk_error)
            raise sdk_error(err, PROVIDER) from err
        response = self.parse(parts, candidate, usage)
        for call in response.tool_calls:
            yield ModelEvent("tool_use", tool_call=call)
        yield ModelEvent("done", response=response)

    # -- request -------------------------------------------------------------

    async def build_params(self, request: ModelRequest) -> dict[str, Any]:
        """The keyword arguments for ``models.generate_content``."""
        system, messages = await prepare(
            request, provider=PROVIDER, model=self.name, takes_image_urls=False
        )
        names = {b.id: b.name for m in messages for b in m.content if type(b) is ToolUseBlock}
        contents: list[dict[str, Any]] = []
        for message in messages:
            role = "model" if message.role == "assistant" else "user"
            parts = _model_parts(message) if role == "model" else _user_parts(message, names)
            if not parts:
                continue
            if contents and contents[-1]["role"] == role:
                contents[-1]["parts"].extend(parts)  # Gemini wants turns to alternate
            else:
                contents.append({"role": role, "parts": parts})
        config: dict[str, Any] = {"automatic_function_calling": {"disable": True}}
        if system:
            config["system_instruction"] = system
        settings = request.settings
        if settings.max_output_tokens is not None:
            config["max_output_tokens"] = settings.max_output_tokens
        if settings.temperature is not None:
            config["temperature"] = settings.temperature
        if settings.thinking_budget is not None:
            config["thinking_config"] = {
                "thinking_budget": settings.thinking_budget,
                "include_thoughts": True,
            }
        if request.tools:
            declarations = [
                {
                    "name": t.name,
                    "description": t.description,
                    "parameters_json_schema": thaw(t.input_schema),
                }
                for t in request.tools
            ]
            config["tools"] = [{"function_declarations": declarations}]
        if request.output is not None:
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = thaw(request.output.schema)
        return {"model": self.name, "contents": contents, "config": config}

    def takes_output_schema(self, with_tools: bool) -> bool:
        """``response_json_schema``; with function calling only from Gemini 3 on
        (earlier models refuse a JSON response type next to tools)."""
        return not with_tools or "gemini-3" in self.name

    # -- reply ---------------------------------------------------------------

    def parse(self, parts: list[Any], candidate: Any, usage: Any) -> ModelResponse:
        """A canonical response from the SDK's parts (whole, or gathered from a stream)."""
        blocks = _blocks(parts)
        calls = any(type(b) is ToolUseBlock for b in blocks)
        finish = getattr(getattr(candidate, "finish_reason", None), "value", None) or ""
        stop: StopReason
        if calls:
            stop = "tool_use"
        elif finish == "MAX_TOKENS":
            stop = "max_tokens"
        elif finish in _REFUSALS:
            stop = "refusal"
        else:
            stop = "end_turn" if finish in ("STOP", "") else "other"
        return ModelResponse(
            Message("assistant", tuple(blocks), origin=Origin(PROVIDER, self.name)),
            _usage(usage),
            stop,
            finish or None,
        )


def _model_parts(message: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    pending_signature: str | None = None
    for block in message.content:
        part: dict[str, Any] | None
        if isinstance(block, ThinkingBlock):
            if not block.thinking:
                pending_signature = block.signature
                continue
            part = {"text": block.thinking, "thought": True}
        elif isinstance(block, TextBlock):
            part = {"text": block.text}
        elif isinstance(block, ToolUseBlock):
            call = {"id": block.id, "name": block.name, "args": thaw(block.input)}
            part = {"function_call": call, "thought_signature": SKIP_SIGNATURE}
        else:
            part = _media_part(block)
        if part is None:
            continue
        signature = pending_signature or (
            block.signature if isinstance(block, ThinkingBlock) else None
        )
        if signature:
            part["thought_signature"] = signature
        pending_signature = None
        parts.append(part)
    return parts


def _user_parts(message: Message, names: dict[str, str]) -> list[dict[str, Any]]:
    responses: list[dict[str, Any]] = []
    others: list[dict[str, Any]] = []
    for block in message.content:
        if isinstance(block, ToolResultBlock):
            response, media = _function_response(block, names)
            responses.append(response)
            others.extend(media)
        elif isinstance(block, TextBlock):
            others.append({"text": block.text})
        else:
            others.append(_media_part(block))
    return responses + others


def _function_response(
    block: ToolResultBlock, names: dict[str, str]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    if isinstance(block.content, str):
        text, media = block.content, []
    else:
        text = "\n".join(p.text for p in block.content if isinstance(p, TextBlock))
        media = [_media_part(p) for p in block.content if not isinstance(p, TextBlock)]
    key = "error" if block.is_error else "result"
    response = {"id": block.tool_use_id, "name": names[block.tool_use_id], "response": {key: text}}
    return {"function_response": response}, media


def _media_part(block: Any) -> dict[str, Any]:
    """Inline data, or a file by URL; the image policy inlined or refused URL images."""
    source = block.source
    if isinstance(source, Base64Source):
        return {"inline_data": {"mime_type": source.media_type, "data": source.data}}
    if isinstance(block, FileBlock):
        return {"file_data": {"mime_type": file_media_type(block), "file_uri": source.url}}
    raise refuse(block, "this request", PROVIDER)


def _blocks(parts: list[Any]) -> list[Any]:
    """Canonical blocks from Gemini parts; adjacent text of one kind is joined."""
    blocks: list[Any] = []
    for part in parts:
        signature = _signature(part)
        if part.function_call is not None:
            call = part.function_call
            if signature:
                blocks.append(ThinkingBlock("", signature))
            call_id = call.id or f"call_{uuid.uuid4().hex[:24]}"
            blocks.append(tool_call(call_id, call.name or "", call.args))
        elif part.text is not None:
            last = blocks[-1] if blocks else None
            if part.thought:
                if isinstance(last, ThinkingBlock) and last.thinking:
                    blocks[-1] = ThinkingBlock(
                        last.thinking + part.text, signature or last.signature
                    )
                else:
                    blocks.append(ThinkingBlock(part.text, signature))
            elif isinstance(last, TextBlock):
                blocks[-1] = TextBlock(last.text + part.text)
                if signature:
                    blocks.insert(-1, ThinkingBlock("", signature))
            else:
                if signature:
                    blocks.append(ThinkingBlock("", signature))
                blocks.append(TextBlock(part.text))
    return blocks


def _signature(part: Any) -> str | None:
    raw = part.thought_signature
    return base64.urlsafe_b64encode(raw).decode("ascii") if raw else None


def _usage(counts: Any) -> Usage:
    if counts is None:
        return Usage()
    return usage(
        input_tokens=counts.prompt_token_count,
        output_tokens=(counts.candidates_token_count or 0) + (counts.thoughts_token_count or 0),
        cache_read=counts.cached_content_token_count,
        input_includes_cache=True,
    )
