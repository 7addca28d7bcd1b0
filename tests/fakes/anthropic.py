"""A strict fake of Anthropic's Messages API (``POST /v1/messages``).

Answers in the real JSON shape, or as the real SSE event stream when the body
has ``"stream": true`` (message_start, content_block_start/delta/stop with
text_delta, thinking_delta, signature_delta and input_json_delta,
message_delta with stop_reason and usage, message_stop). It refuses what the
real API refuses, with the real texts; see :mod:`._anthropic_rules` for each
text and where it was found. Authentication accepts ``x-api-key`` or
``Authorization: Bearer`` (the current SDK sends the latter); the 401 texts
"x-api-key header is required" and "invalid x-api-key" are the API's own
(cline/cline#12, stackblitz-labs/bolt.diy#156).

Thinking signatures are issued by the fake (an HMAC over model and text), so a
signature from another model, an empty one or a made-up one is refused.

Example::

    with FakeAnthropic(Reply([Thinking("hmm"), ToolCall("add", {"a": 1})])) as fake:
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="test")
        message = client.messages.create(model="claude-sonnet-4-5", max_tokens=64, ...)
"""

from __future__ import annotations

import json
from typing import Any, ClassVar, Final

from ._anthropic_rules import (
    error_envelope,
    redacted_data,
    thinking_signature,
    validate_request,
)
from ._replies import AUTO, Reply, Text, Thinking, ToolCall, chunks
from ._server import (
    FakeServer,
    HttpReply,
    RecordedRequest,
    Refusal,
    json_reply,
    sse_event,
    sse_reply,
)
from ._tokens import random_alnum

__all__ = ["FakeAnthropic", "redacted_data", "thinking_signature"]

STOP_REASONS: Final = {"end": "end_turn", "tool_use": "tool_use", "max_tokens": "max_tokens"}
ERROR_TYPES: Final = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: (
        "permission_error",
        "Your API key does not have permission to use the specified resource.",
    ),
    404: ("not_found_error", "Not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of requests has exceeded your rate limit."),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


class FakeAnthropic(FakeServer):
    """Fake Anthropic server. Point ``anthropic.Anthropic(base_url=fake.base_url)`` at it."""

    name: ClassVar[str] = "FakeAnthropic"

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind, default = ERROR_TYPES.get(status, ("api_error", "Internal server error"))
        return error_envelope(kind, message or default)

    def handle(self, request: RecordedRequest) -> HttpReply:
        self._check_auth(request)
        if request.method != "POST" or request.path != "/v1/messages":
            raise Refusal(404, error_envelope("not_found_error", "Not Found"))
        validate_request(request.body)
        reply = self.next_reply(request)
        body = request.body
        model = str(body["model"])
        blocks = [_render_block(part, model) for part in reply.parts]
        message = {
            "id": "msg_01" + random_alnum(22),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": reply.stop(STOP_REASONS),
            "stop_sequence": None,
            "usage": _usage(*reply.usage),
        }
        if body.get("stream"):
            return sse_reply(_stream_events(message, reply))
        return json_reply(200, message, {"request-id": "req_011C" + random_alnum(20)})

    def _check_auth(self, request: RecordedRequest) -> None:
        key = request.headers.get("x-api-key")
        bearer = request.headers.get("authorization", "")
        if key is None and bearer.lower().startswith("bearer "):
            key = bearer[7:].strip()
        if not key:
            raise Refusal(
                401, error_envelope("authentication_error", "x-api-key header is required")
            )
        if key != self.api_key:
            raise Refusal(401, error_envelope("authentication_error", "invalid x-api-key"))


def _usage(
    input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": cache_write,
        "cache_read_input_tokens": cache_read,
    }


def _render_block(part: Text | Thinking | ToolCall, model: str) -> dict[str, Any]:
    if isinstance(part, Text):
        return {"type": "text", "text": part.text}
    if isinstance(part, Thinking):
        if part.redacted:
            return {"type": "redacted_thinking", "data": redacted_data(model, part.text)}
        signature = part.signature
        if signature is AUTO:
            signature = thinking_signature(model, part.text)
        return {"type": "thinking", "thinking": part.text, "signature": signature or ""}
    return {
        "type": "tool_use",
        "id": part.id or "toolu_01" + random_alnum(22),
        "name": part.name,
        "input": dict(part.input),
    }


def _stream_events(message: dict[str, Any], reply: Reply) -> list[str]:
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "usage": _usage(reply.usage[0], 1, *reply.usage[2:]),
    }
    events = [
        sse_event({"type": "message_start", "message": start}, "message_start"),
        sse_event({"type": "ping"}, "ping"),
    ]
    for index, block in enumerate(message["content"]):
        events.extend(_block_events(index, block))
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {"output_tokens": reply.usage[1]},
    }
    events.append(sse_event(delta, "message_delta"))
    events.append(sse_event({"type": "message_stop"}, "message_stop"))
    return events


def _block_events(index: int, block: dict[str, Any]) -> list[str]:
    kind = block["type"]
    if kind == "text":
        opening = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in chunks(block["text"])]
    elif kind == "thinking":
        opening = {"type": "thinking", "thinking": "", "signature": ""}
        deltas = [{"type": "thinking_delta", "thinking": p} for p in chunks(block["thinking"])]
        if block["signature"]:
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
    elif kind == "tool_use":
        opening = {**block, "input": {}}
        arguments = json.dumps(block["input"])
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in chunks(arguments)]
    else:
        opening, deltas = block, []
    events = [
        sse_event(
            {"type": "content_block_start", "index": index, "content_block": opening},
            "content_block_start",
        )
    ]
    for delta in deltas:
        payload = {"type": "content_block_delta", "index": index, "delta": delta}
        events.append(sse_event(payload, "content_block_delta"))
    events.append(sse_event({"type": "content_block_stop", "index": index}, "content_block_stop"))
    return events
