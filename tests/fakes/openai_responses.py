"""A strict fake of the OpenAI Responses API (``POST /v1/responses``).

Answers a ``response`` object, or with ``"stream": true`` the real event stream:
response.created, response.in_progress, response.output_item.added,
response.reasoning_summary_part.added / response.reasoning_summary_text.delta /
.done, response.content_part.added, response.output_text.delta / .done,
response.function_call_arguments.delta / .done, response.output_item.done and
response.completed (response.incomplete when the reply stops on max_tokens).

Input items understood: messages (input_text, input_image, input_file;
output_text and refusal for the assistant), function_call,
function_call_output, reasoning (with ``encrypted_content`` when
``store=false``), item_reference; ``previous_response_id`` chains replies the
fake stored. Reasoning items come back with ``encrypted_content`` when
``include`` asks for ``reasoning.encrypted_content``. Ids follow the real
grammar: ``resp_``/``rs_``/``msg_``/``fc_`` + hex sharing a per-response prefix,
``call_`` + 24 characters. Refusal texts and their sources: :mod:`._responses_rules`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, ClassVar, Final

from ._openai_common import check_bearer, invalid, stock_error
from ._replies import Reply, Scripted, Text, Thinking, ToolCall, chunks
from ._responses_rules import Registry, encrypted_content, input_items, validate_input
from ._schemas import openai_format_problem
from ._server import (
    FakeServer,
    HttpReply,
    RecordedRequest,
    Refusal,
    json_reply,
    sse_event,
    sse_reply,
)
from ._tokens import random_alnum, random_hex

__all__ = ["FakeOpenAIResponses", "encrypted_content"]

STATUSES: Final = {"end": "completed", "tool_use": "completed", "max_tokens": "incomplete"}


class FakeOpenAIResponses(FakeServer):
    """Fake Responses server; use ``openai.OpenAI(base_url=fake.base_url + "/v1")``."""

    name: ClassVar[str] = "FakeOpenAIResponses"

    def __init__(self, *script: Scripted | str, api_key: str = "test") -> None:
        super().__init__(*script, api_key=api_key)
        self.registry = Registry()

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return stock_error(status, message)

    def handle(self, request: RecordedRequest) -> HttpReply:
        check_bearer(request, self.api_key)
        if request.method != "POST" or request.path != "/v1/responses":
            raise Refusal(
                404, stock_error(404, f"Unknown request URL: {request.method} {request.path}")
            )
        body = request.body if isinstance(request.body, dict) else {}
        prior = validate_input(body, self.registry)
        text = body.get("text")
        fmt = text.get("format") if isinstance(text, dict) else None
        if fmt is not None and (problem := openai_format_problem(fmt, "text.format")):
            raise invalid(*problem)
        reply = self.next_reply(request)
        response = self._response(body, reply)
        with self._lock:
            self._remember(body, prior, response)
        if body.get("stream"):
            return sse_reply(_events(response))
        return json_reply(200, response)

    def _response(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        prefix = random_hex(24)
        include = body.get("include") or []
        output = _output(reply, prefix, "reasoning.encrypted_content" in include)
        status = reply.stop(STATUSES)
        now = int(time.time())
        prompt, completion = reply.usage
        return {
            "id": f"resp_{prefix}{random_hex(24)}",
            "object": "response",
            "created_at": now,
            "completed_at": now if status == "completed" else None,
            "status": status,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"}
            if status == "incomplete"
            else None,
            "instructions": body.get("instructions"),
            "max_output_tokens": body.get("max_output_tokens"),
            "model": body["model"],
            "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"),
            "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
            "store": body.get("store") is not False,
            "temperature": body.get("temperature", 1.0),
            "text": body.get("text") or {"format": {"type": "text"}},
            "tool_choice": body.get("tool_choice", "auto"),
            "tools": body.get("tools") or [],
            "top_p": body.get("top_p", 1.0),
            "truncation": body.get("truncation", "disabled"),
            "metadata": body.get("metadata") or {},
            "user": None,
            "usage": {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": completion,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + completion,
            },
        }

    def _remember(
        self, body: dict[str, Any], prior: list[dict[str, Any]], response: dict[str, Any]
    ) -> None:
        reasoning = None
        output = response["output"]
        for index, item in enumerate(output):
            if item["type"] == "reasoning":
                reasoning = item["id"]
                if index + 1 < len(output):
                    self.registry.follower_of[reasoning] = output[index + 1]["id"]
            elif reasoning is not None:
                self.registry.reasoning_of[item["id"]] = reasoning
        if response["store"]:
            for item in response["output"]:
                self.registry.stored[item["id"]] = item
            chain = prior + input_items(body) + response["output"]
            self.registry.responses[response["id"]] = chain


def _output(reply: Reply, prefix: str, include_encrypted: bool) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    for part in reply.parts:
        if isinstance(part, Thinking):
            output.append(_reasoning(part, f"rs_{prefix}{random_hex(26)}", include_encrypted))
        elif isinstance(part, Text):
            text = {"type": "output_text", "text": part.text, "annotations": [], "logprobs": []}
            if output and output[-1]["type"] == "message":
                output[-1]["content"].append(text)
                continue
            output.append(
                {
                    "type": "message",
                    "id": f"msg_{prefix}{random_hex(26)}",
                    "status": "completed",
                    "role": "assistant",
                    "content": [text],
                }
            )
        else:
            output.append(_function_call(part, f"fc_{prefix}{random_hex(26)}"))
    return output


def _reasoning(part: Thinking, item_id: str, include_encrypted: bool) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": part.text}] if part.text else [],
    }
    if include_encrypted and part.signature is not None:
        item["encrypted_content"] = (
            part.signature if isinstance(part.signature, str) else encrypted_content(item_id)
        )
    return item


def _function_call(part: ToolCall, item_id: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": part.id or "call_" + random_alnum(24),
        "name": part.name,
        "arguments": json.dumps(dict(part.input)),
        "status": "completed",
    }


def _events(response: dict[str, Any]) -> list[str]:
    events: list[str] = []

    def emit(kind: str, **fields: Any) -> None:
        payload = {"type": kind, **fields, "sequence_number": len(events)}
        events.append(sse_event(payload, kind))

    snapshot = {
        **response,
        "status": "in_progress",
        "output": [],
        "usage": None,
        "completed_at": None,
    }
    emit("response.created", response=snapshot)
    emit("response.in_progress", response=snapshot)
    for index, item in enumerate(response["output"]):
        _item_events(emit, index, item)
    final = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    emit(final, response=response)
    return events


def _item_events(emit: Callable[..., None], index: int, item: dict[str, Any]) -> None:
    ids = {"item_id": item["id"], "output_index": index}
    kind = item["type"]
    if kind == "reasoning":
        emit("response.output_item.added", output_index=index, item={**item, "summary": []})
        for k, summary in enumerate(item["summary"]):
            empty = {"type": "summary_text", "text": ""}
            emit("response.reasoning_summary_part.added", **ids, summary_index=k, part=empty)
            for piece in chunks(summary["text"]):
                emit("response.reasoning_summary_text.delta", **ids, summary_index=k, delta=piece)
            emit(
                "response.reasoning_summary_text.done", **ids, summary_index=k, text=summary["text"]
            )
            emit("response.reasoning_summary_part.done", **ids, summary_index=k, part=summary)
    elif kind == "message":
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "content": []},
        )
        for c, part in enumerate(item["content"]):
            emit("response.content_part.added", **ids, content_index=c, part={**part, "text": ""})
            for piece in chunks(part["text"]):
                emit("response.output_text.delta", **ids, content_index=c, delta=piece, logprobs=[])
            emit(
                "response.output_text.done", **ids, content_index=c, text=part["text"], logprobs=[]
            )
            emit("response.content_part.done", **ids, content_index=c, part=part)
    else:
        emit(
            "response.output_item.added",
            output_index=index,
            item={**item, "arguments": "", "status": "in_progress"},
        )
        for piece in chunks(item["arguments"]):
            emit("response.function_call_arguments.delta", **ids, delta=piece)
        emit(
            "response.function_call_arguments.done",
            **ids,
            name=item["name"],
            arguments=item["arguments"],
        )
    emit("response.output_item.done", output_index=index, item=item)
