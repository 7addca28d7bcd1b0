"""A strict fake of OpenAI Chat Completions (``POST /v1/chat/completions``).

Answers a ``chat.completion`` object, or with ``"stream": true`` a stream of
``chat.completion.chunk`` events ending in ``data: [DONE]`` (a usage chunk only
with ``stream_options.include_usage``). Thinking parts come back as
``reasoning_content``, as OpenAI-compatible reasoning servers send it.

Refusal texts and where they were seen:
- "messages with role 'tool' must be a response to a preceeding message with
  'tool_calls'" (their spelling), param ``messages.[N].role``: smarter-sh/smarter#264
- "An assistant message with 'tool_calls' must be followed by tool messages …":
  router-for-me/CLIProxyAPI#2798, sdcb/chats#132
- "'tool_call_id' of '…' not found in 'tool_calls' of previous message": dapr/dapr-agents#145
- "string too long. Expected a string with maximum length 40 …": anomalyco/opencode#12653
- "Image URLs are only allowed for messages with role 'user' …": openai/openai-node#1030,
  OpenHands/OpenHands#7700
- "Invalid image URL: … but got a value without the 'data:' prefix.": Alibaba-NLP/OmniSearch#3
- Mistral (``strict_mistral=True``), in Mistral's own envelope: "Tool call id was … but
  must be a-z, A-Z, 0-9, with a length of 9." (jackmpcollins/magentic#276,
  mistralai/mistral-vibe#1075) and "Unexpected role 'user' after role 'tool'"
  (datapizza-labs/datapizza-ai#98).
Reconstructed (OpenAI's ``invalid_value`` style, wording not seen verbatim): unknown
roles and content part types not allowed for a role.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, ClassVar, Final

from ._openai_common import check_bearer, check_image_url, invalid, stock_error, too_long
from ._replies import Reply, Scripted, Text, Thinking, ToolCall, chunks
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
from ._tokens import random_alnum

__all__ = ["FakeOpenAIChat"]

FINISH_REASONS: Final = {"end": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
ROLES: Final = ("system", "assistant", "user", "function", "tool", "developer")
PART_TYPES: Final = {
    "system": ("text",),
    "developer": ("text",),
    "assistant": ("text", "refusal"),
    "tool": ("text",),
    "function": ("text",),
    "user": ("text", "image_url", "input_audio", "file"),
}
MISTRAL_ID: Final = re.compile(r"^[a-zA-Z0-9]{9}$")


class FakeOpenAIChat(FakeServer):
    """Fake Chat Completions server; use ``openai.OpenAI(base_url=fake.base_url + "/v1")``.

    ``strict_mistral=True`` adds Mistral's refusals and mints 9-character ids.
    """

    name: ClassVar[str] = "FakeOpenAIChat"

    def __init__(
        self, *script: Scripted | str, api_key: str = "test", strict_mistral: bool = False
    ) -> None:
        super().__init__(*script, api_key=api_key)
        self.strict_mistral = strict_mistral

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return stock_error(status, message)

    def handle(self, request: RecordedRequest) -> HttpReply:
        check_bearer(request, self.api_key)
        if request.method != "POST" or request.path != "/v1/chat/completions":
            raise Refusal(
                404, stock_error(404, f"Unknown request URL: {request.method} {request.path}")
            )
        body = request.body if isinstance(request.body, dict) else {}
        self._validate(body)
        reply = self.next_reply(request)
        completion = self._completion(body, reply)
        if body.get("stream"):
            return sse_reply(_chunks(completion, reply, _include_usage(body)))
        return json_reply(200, completion)

    # -- validation --------------------------------------------------------

    def _validate(self, body: dict[str, Any]) -> None:
        if "model" not in body:
            raise invalid("you must provide a model parameter")
        messages = body.get("messages")
        if messages is None:
            raise invalid(
                "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"
            )
        if not isinstance(messages, list) or not messages:
            raise invalid("[] is too short - 'messages'", "messages")
        if "response_format" in body and (
            problem := openai_format_problem(
                _flat_format(body["response_format"]), "response_format.json_schema"
            )
        ):
            raise invalid(*problem)
        pending: list[str] = []
        calls: list[str] | None = None
        previous = None
        for i, message in enumerate(messages):
            role = message.get("role")
            if role not in ROLES:
                supported = "'system', 'assistant', 'user', 'function', 'tool', and 'developer'"
                raise invalid(
                    f"Invalid value: '{role}'. Supported values are: {supported}.",
                    f"messages[{i}].role",
                    "invalid_value",
                )
            _check_parts(i, message)
            if role == "tool":
                calls = self._check_tool_message(i, message, calls, pending)
            else:
                if pending:
                    raise _unanswered(i, pending)
                if self.strict_mistral and role == "user" and previous == "tool":
                    raise _mistral(
                        "Unexpected role 'user' after role 'tool'",
                        "invalid_request_message_order",
                        "3230",
                    )
                calls = self._tool_call_ids(i, message)
                pending = list(calls or [])
            previous = role
        if pending:
            raise _unanswered(len(messages) - 1, pending)

    def _tool_call_ids(self, i: int, message: dict[str, Any]) -> list[str] | None:
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            return None
        ids = []
        for k, call in enumerate(message["tool_calls"]):
            call_id = str(call.get("id", ""))
            if len(call_id) > 40:
                raise too_long(f"messages[{i}].tool_calls[{k}].id", call_id, 40)
            self._check_mistral_id(call_id)
            ids.append(call_id)
        return ids

    def _check_tool_message(
        self, i: int, message: dict[str, Any], calls: list[str] | None, pending: list[str]
    ) -> list[str] | None:
        call_id = str(message.get("tool_call_id", ""))
        if len(call_id) > 40:
            raise too_long(f"messages[{i}].tool_call_id", call_id, 40)
        self._check_mistral_id(call_id)
        if calls is None:
            raise invalid(
                "Invalid parameter: messages with role 'tool' must be a response to a "
                "preceeding message with 'tool_calls'.",
                f"messages.[{i}].role",
            )
        if call_id not in calls:
            raise invalid(
                f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in 'tool_calls' "
                "of previous message.",
                f"messages.[{i}].tool_call_id",
            )
        if call_id in pending:
            pending.remove(call_id)
        return calls

    def _check_mistral_id(self, call_id: str) -> None:
        if self.strict_mistral and not MISTRAL_ID.match(call_id):
            message = f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with a length of 9."
            raise _mistral(message, "invalid_function_call", "3280")

    # -- rendering ---------------------------------------------------------

    def _completion(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        text = "".join(p.text for p in reply.parts if isinstance(p, Text))
        message: dict[str, Any] = {
            "role": "assistant",
            "content": text if text or not reply.tool_calls else None,
            "refusal": None,
            "annotations": [],
        }
        thinking = "".join(p.text for p in reply.parts if isinstance(p, Thinking))
        if thinking:
            message["reasoning_content"] = thinking
        if reply.tool_calls:
            message["tool_calls"] = [self._tool_call(call) for call in reply.tool_calls]
        prompt, completion = reply.usage
        return {
            "id": "chatcmpl-" + random_alnum(29),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "system_fingerprint": "fp_fake",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.stop(FINISH_REASONS),
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }

    def _tool_call(self, call: ToolCall) -> dict[str, Any]:
        minted = random_alnum(9) if self.strict_mistral else "call_" + random_alnum(24)
        return {
            "id": call.id or minted,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(dict(call.input))},
        }


def _check_parts(i: int, message: dict[str, Any]) -> None:
    content = message.get("content")
    if not isinstance(content, list):
        return
    role = message["role"]
    allowed = PART_TYPES[role]
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "image_url" and role != "user":
            raise invalid(
                f"Invalid 'messages[{i}]'. Image URLs are only allowed for messages with role "
                f"'user', but this message with role '{role}' contains an image URL.",
                f"messages[{i}]",
                "invalid_value",
            )
        if kind not in allowed:
            raise invalid(
                f"Invalid value: '{kind}'. Supported values are: {_listing(allowed)}.",
                f"messages[{i}].content[{j}].type",
                "invalid_value",
            )
        if kind == "image_url":
            url = (part.get("image_url") or {}).get("url")
            check_image_url(f"messages[{i}].content[{j}].image_url.url", url)


def _listing(values: tuple[str, ...]) -> str:
    quoted = [f"'{v}'" for v in values]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def _unanswered(i: int, pending: list[str]) -> Refusal:
    return invalid(
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(pending),
        f"messages.[{i}].role",
    )


def _mistral(message: str, kind: str, code: str) -> Refusal:
    return Refusal(
        400, {"object": "error", "message": message, "type": kind, "param": None, "code": code}
    )


def _include_usage(body: dict[str, Any]) -> bool:
    return bool((body.get("stream_options") or {}).get("include_usage"))


def _chunks(completion: dict[str, Any], reply: Reply, include_usage: bool) -> list[str]:
    head = {k: completion[k] for k in ("id", "created", "model", "system_fingerprint")}
    head["object"] = "chat.completion.chunk"
    if include_usage:
        head["usage"] = None

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse_event({**head, "choices": [choice]})

    message = completion["choices"][0]["message"]
    events = [chunk({"role": "assistant", "content": "", "refusal": None})]
    if message.get("reasoning_content"):
        events += [chunk({"reasoning_content": p}) for p in chunks(message["reasoning_content"])]
    if message["content"]:
        events += [chunk({"content": p}) for p in chunks(message["content"])]
    for k, call in enumerate(message.get("tool_calls", [])):
        opening = {
            **call,
            "index": k,
            "function": {"name": call["function"]["name"], "arguments": ""},
        }
        events.append(chunk({"tool_calls": [opening]}))
        for piece in chunks(call["function"]["arguments"]):
            events.append(chunk({"tool_calls": [{"index": k, "function": {"arguments": piece}}]}))
    events.append(chunk({}, completion["choices"][0]["finish_reason"]))
    if include_usage:
        events.append(sse_event({**head, "choices": [], "usage": completion["usage"]}))
    events.append(sse_event("[DONE]"))
    return events


def _flat_format(value: Any) -> Any:
    """``{"type", "json_schema": {...}}`` as one dict, as Responses has it."""
    if isinstance(value, dict) and isinstance(value.get("json_schema"), dict):
        return {"type": value.get("type"), **value["json_schema"]}
    return value
