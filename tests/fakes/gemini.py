"""A strict fake of the Gemini API (``generateContent`` / ``streamGenerateContent``).

Serves ``POST /{v1,v1beta}/models/{model}:generateContent`` and
``:streamGenerateContent?alt=sse`` (without ``alt=sse``, a JSON array of
chunks, as the real API does); google-genai 3.x calls ``/v1/`` by default.
The key comes from ``x-goog-api-key`` or the ``key`` query parameter. Replies
use the real shape: ``candidates[].content.parts`` with ``text``, ``thought``,
``thoughtSignature`` and ``functionCall``, ``finishReason``, ``usageMetadata``.
Thought signatures are issued by the fake (first function call of a reply,
and thought parts), bound to the model and the function name.

Refusal texts (Google's envelope ``{"error": {"code", "message", "status"}}``):
- "Function call is missing a thought_signature in functionCall parts. …" (gemini-3
  models, current turn only, placeholder ``skip_thought_signature_validator`` accepted):
  niki914/zafiro#100, csells/dartantic#86; rules from ai.google.dev thought-signatures docs
- "Corrupted thought signature.": google-gemini/gemini-cli#13467
- "Please ensure that the number of function response parts is equal to the number of
  function call parts of the function call turn.": google-gemini/gemini-cli#16415
- "Please ensure that function response turn comes immediately after a function call
  turn." (langchain-ai/langchain#27799) and "… function call turn comes immediately after
  a user turn or after a function response turn." (google-gemini/gemini-cli#11814)
- "Please use a valid role: user, model.": songquanpeng/one-api#1385
- "… function_response.name: Name cannot be empty.": langflow-ai/langflow#9437
- "The GenerateContentRequest proto is invalid: … Invalid function name. …": kaitranntt/ccs#219
- "API key not valid. Please pass a valid API key." with ``API_KEY_INVALID``:
  cequence-io/openai-scala-client#109
Reconstructed (wording not seen verbatim): empty contents / empty parts texts and the
403 for a missing key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, ClassVar, Final

from ._replies import AUTO, Reply, Text, Thinking, ToolCall, chunks
from ._schemas import gemini_format_problem
from ._server import FakeServer, HttpReply, RecordedRequest, Refusal, json_reply, sse_reply
from ._tokens import decode_b64, random_alnum, sign_bytes, signature_ok

__all__ = ["SKIP_SIGNATURE", "FakeGemini", "thought_signature"]

PATH: Final = re.compile(
    r"^/(v1|v1beta|v1alpha)/models/([^/:]+):(generateContent|streamGenerateContent)$"
)
FUNCTION_NAME: Final = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$")
SKIP_SIGNATURE: Final = "skip_thought_signature_validator"
FINISH_REASONS: Final = {"end": "STOP", "tool_use": "STOP", "max_tokens": "MAX_TOKENS"}
STATUSES: Final = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
SIGNATURE_DOCS: Final = "https://ai.google.dev/gemini-api/docs/thought-signatures"


def thought_signature(model: str, name: str) -> str:
    """The ``thoughtSignature`` the fake issues for a call of ``name`` by ``model``."""
    return sign_bytes(model, "functionCall", name)


def envelope(status: int, message: str, **extra: Any) -> dict[str, Any]:
    """Google's error envelope."""
    return {
        "error": {
            "code": status,
            "message": message,
            "status": STATUSES.get(status, "UNKNOWN"),
            **extra,
        }
    }


def invalid(message: str) -> Refusal:
    """A 400 ``INVALID_ARGUMENT``."""
    return Refusal(400, envelope(400, message))


class FakeGemini(FakeServer):
    """Fake Gemini server; use ``genai.Client(api_key="test",
    http_options=types.HttpOptions(base_url=fake.base_url))``."""

    name: ClassVar[str] = "FakeGemini"

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return envelope(status, message or STATUSES.get(status, "Error"))

    def handle(self, request: RecordedRequest) -> HttpReply:
        self._check_auth(request)
        match = PATH.match(request.path)
        if request.method != "POST" or match is None:
            raise Refusal(404, envelope(404, f"Requested entity was not found: {request.path}"))
        model = match.group(2)
        body = request.body if isinstance(request.body, dict) else {}
        validate_contents(body, model)
        reply = self.next_reply(request)
        parts = _render_parts(reply, model)
        response_id = random_alnum(22)
        if match.group(3) == "generateContent":
            return json_reply(200, _response(reply, model, response_id, parts, final=True))
        pieces = list(_stream_responses(reply, model, response_id, parts))
        if request.query.get("alt") == "sse":
            return sse_reply(f"data: {json.dumps(piece)}\r\n\r\n" for piece in pieces)
        return json_reply(200, pieces)

    def _check_auth(self, request: RecordedRequest) -> None:
        key = request.headers.get("x-goog-api-key") or request.query.get("key")
        if not key:
            raise Refusal(
                403,
                envelope(
                    403,
                    "Method doesn't allow unregistered callers (callers without established "
                    "identity). Please use API Key or other form of API consumer identity to "
                    "call this API.",
                ),
            )
        if key != self.api_key:
            info = {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            }
            message = "API key not valid. Please pass a valid API key."
            raise Refusal(400, envelope(400, message, details=[info]))


def validate_contents(body: dict[str, Any], model: str) -> None:
    """Raise the refusal the real API would give for ``body["contents"]``."""
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        raise invalid("* GenerateContentRequest.contents: contents is not specified\n")
    for i, content in enumerate(contents):
        if content.get("role", "user") not in ("user", "model"):
            raise invalid("Please use a valid role: user, model.")
        if not content.get("parts"):
            raise invalid(
                f"* GenerateContentRequest.contents[{i}].parts: contents.parts must not be empty.\n"
            )
    for i, content in enumerate(contents):
        _check_part_names(i, content)
    for i in range(len(contents)):
        _check_turn_order(i, contents)
    _check_declarations(body.get("tools") or [])
    if (problem := gemini_format_problem(body, model)) is not None:
        raise invalid(problem)
    if "gemini-3" in model:
        _check_signatures(contents, model)


def _check_part_names(i: int, content: dict[str, Any]) -> None:
    for j, part in enumerate(content.get("parts") or []):
        for key, field in (
            ("functionCall", "function_call"),
            ("functionResponse", "function_response"),
        ):
            value = part.get(key, part.get(field))
            if value is not None and not (value or {}).get("name"):
                raise invalid(
                    f"* GenerateContentRequest.contents[{i}].parts[{j}].{field}.name: "
                    "Name cannot be empty.\n"
                )


def _check_declarations(tools: list[dict[str, Any]]) -> None:
    for t, tool in enumerate(tools):
        declarations = tool.get("functionDeclarations", tool.get("function_declarations")) or []
        for d, declaration in enumerate(declarations):
            if not FUNCTION_NAME.match(str(declaration.get("name", ""))):
                raise invalid(
                    "The GenerateContentRequest proto is invalid:\n  * "
                    f"tools[{t}].function_declarations[{d}].name: [FIELD_INVALID] Invalid "
                    "function name. Must start with a letter or an underscore. Must be a-z, "
                    "A-Z, 0-9, or contain underscores (_), dots (.), colons (:), or dashes (-), "
                    "with a maximum length of 64."
                )


def _calls(content: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in content.get("parts") or [] if "functionCall" in p or "function_call" in p]


def _responses(content: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        p for p in content.get("parts") or [] if "functionResponse" in p or "function_response" in p
    ]


def _check_turn_order(i: int, contents: list[dict[str, Any]]) -> None:
    content = contents[i]
    previous = contents[i - 1] if i else None
    count_text = (
        "Please ensure that the number of function response parts is equal to the number of "
        "function call parts of the function call turn."
    )
    if _responses(content):
        if previous is None or previous.get("role") != "model" or not _calls(previous):
            raise invalid(
                "Please ensure that function response turn comes immediately after a function "
                "call turn."
            )
        if len(_responses(content)) != len(_calls(previous)):
            raise invalid(count_text)
    if _calls(content):
        if previous is None or previous.get("role", "user") != "user":
            raise invalid(
                "Please ensure that function call turn comes immediately after a user turn or "
                "after a function response turn."
            )
        following = contents[i + 1] if i + 1 < len(contents) else None
        if following is not None and not _responses(following):
            raise invalid(count_text)


def _check_signatures(contents: list[dict[str, Any]], model: str) -> None:
    start = 0
    for i, content in enumerate(contents):
        parts = content.get("parts") or []
        if content.get("role", "user") == "user" and len(_responses(content)) < len(parts):
            start = i
    for i in range(start + 1, len(contents)):
        calls = _calls(contents[i]) if contents[i].get("role") == "model" else []
        if not calls:
            continue
        first = calls[0]
        call = first.get("functionCall") or first.get("function_call") or {}
        signature = first.get("thoughtSignature", first.get("thought_signature"))
        if not signature:
            raise invalid(
                "Function call is missing a thought_signature in functionCall parts. This is "
                "required for tools to work correctly, and missing thought_signature may lead to "
                "degraded model performance. Additional data, function call "
                f"`default_api:{call.get('name')}` , position {i + 1}. Please refer to "
                f"{SIGNATURE_DOCS} for more details."
            )
        if not _signature_accepted(signature, model, str(call.get("name"))):
            raise invalid("Corrupted thought signature.")


def _signature_accepted(signature: str, model: str, name: str) -> bool:
    if signature == SKIP_SIGNATURE or decode_b64(signature) == SKIP_SIGNATURE.encode():
        return True
    return signature_ok(signature, model, "functionCall", name)


def _render_parts(reply: Reply, model: str) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    signed_call = False
    for part in reply.parts:
        if isinstance(part, Text):
            parts.append({"text": part.text})
        elif isinstance(part, Thinking):
            rendered: dict[str, Any] = {"text": part.text, "thought": True}
            signature = (
                sign_bytes(model, "thought", part.text)
                if part.signature is AUTO
                else part.signature
            )
            if signature:
                rendered["thoughtSignature"] = signature
            parts.append(rendered)
        else:
            parts.append(_call_part(part, model, sign=not signed_call))
            signed_call = True
    return parts


def _call_part(call: ToolCall, model: str, *, sign: bool) -> dict[str, Any]:
    function_call: dict[str, Any] = {"name": call.name, "args": dict(call.input)}
    if call.id:
        function_call["id"] = call.id
    rendered: dict[str, Any] = {"functionCall": function_call}
    signature = call.signature
    if signature is AUTO:
        signature = thought_signature(model, call.name) if sign else None
    if signature:
        rendered["thoughtSignature"] = signature
    return rendered


def _response(
    reply: Reply, model: str, response_id: str, parts: list[dict[str, Any]], *, final: bool
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    response: dict[str, Any] = {
        "candidates": [candidate],
        "modelVersion": model,
        "responseId": response_id,
    }
    if final:
        prompt, completion = reply.usage
        candidate["finishReason"] = reply.stop(FINISH_REASONS)
        response["usageMetadata"] = {
            "promptTokenCount": prompt,
            "candidatesTokenCount": completion,
            "totalTokenCount": prompt + completion,
        }
    return response


def _stream_responses(
    reply: Reply, model: str, response_id: str, parts: list[dict[str, Any]]
) -> Iterable[dict[str, Any]]:
    pieces: list[dict[str, Any]] = []
    for part in parts:
        if "text" not in part:
            pieces.append(part)
            continue
        texts = chunks(part["text"])
        for k, text in enumerate(texts):
            piece = {**part, "text": text}
            if k < len(texts) - 1:
                piece.pop("thoughtSignature", None)
            pieces.append(piece)
    for k, piece in enumerate(pieces or [{"text": ""}]):
        yield _response(reply, model, response_id, [piece], final=k == max(len(pieces), 1) - 1)
