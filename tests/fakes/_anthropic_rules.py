"""What the Anthropic Messages API refuses, with its real error texts.

Sources of the texts (public issue threads quoting the API's 400 bodies):
- tool pairing: anthropics/claude-code#5989, #1237, #13460; router-for-me/CLIProxyAPI#497
- "Did not find N `tool_result` block(s)…": anthropics/claude-code#37, apify/tester-mcp-client#12
- thinking first: OpenRouterTeam/ai-sdk-provider#162, lbjlaq/Antigravity-Manager#139
- thinking disabled in final message: tailcallhq/forgecode#1853
- invalid signature: ding113/claude-code-hub#518, lbjlaq/Antigravity-Manager#498
- id pattern: CommandCodeAI/command-code#323; 64 characters: pydantic's max_length text
  ("String should have at most 64 characters", seen in anthropics/claude-code via
  mims-harvard/ToolUniverse#65)
- empty content: anthropics/claude-code#6774, #59812; whitespace text: anomalyco/opencode#3194
- system role: Maol-1997/cursor-claude-connector#3
- image media type (and the ``tool_result.content.N.image`` location): anthropics/claude-code#5955
- cache_control count: tghamm/Anthropic.SDK#50
- ``max_tokens: Field required``: immersive-translate/immersive-translate#3993

Reconstructed in the API's pydantic style (wording not seen verbatim): role
``Input should be 'user' or 'assistant'``, unknown block tags, url image
sources, ``cache_control`` type/ttl literals.
"""

from __future__ import annotations

import base64
import hmac
import re
from typing import Any, Final

from ._schemas import anthropic_format_problem
from ._server import Refusal
from ._tokens import decode_b64, mac, sign, signature_ok

ID_PATTERN: Final = re.compile(r"^[a-zA-Z0-9_-]+$")
MEDIA_TYPES: Final = ("image/jpeg", "image/png", "image/gif", "image/webp")
BLOCK_TAGS: Final = (
    "text",
    "image",
    "document",
    "search_result",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "tool_result",
    "server_tool_use",
    "web_search_tool_result",
)
THINKING_DOCS: Final = "https://docs.claude.com/en/docs/build-with-claude/extended-thinking"


def thinking_signature(model: str, text: str) -> str:
    """The signature the fake issues for a thinking block of ``model``."""
    return sign(model, "thinking", text)


def redacted_data(model: str, text: str) -> str:
    """The opaque ``data`` of a redacted thinking block the fake issues."""
    return base64.b64encode(text.encode() + mac(model, "redacted", text)).decode()


def redacted_ok(model: str, data: object) -> bool:
    """Whether ``data`` is a redacted thinking blob the fake issued for ``model``."""
    raw = decode_b64(data) if isinstance(data, str) and data else None
    if raw is None or len(raw) <= 32:
        return False
    text = raw[:-32].decode(errors="replace")
    return hmac.compare_digest(raw[-32:], mac(model, "redacted", text))


def invalid(message: str) -> Refusal:
    """A 400 ``invalid_request_error`` in Anthropic's envelope."""
    return Refusal(400, error_envelope("invalid_request_error", message))


def error_envelope(kind: str, message: str) -> dict[str, Any]:
    """``{"type": "error", "error": {"type": kind, "message": message}}``."""
    return {"type": "error", "error": {"type": kind, "message": message}}


def validate_request(body: Any) -> None:
    """Raise the refusal the real API would give for ``body``, if any."""
    if not isinstance(body, dict):
        raise invalid("body: Input should be a valid dictionary")
    for name in ("max_tokens", "messages", "model"):
        if name not in body:
            raise invalid(f"{name}: Field required")
    messages = body["messages"]
    if not isinstance(messages, list):
        raise invalid("messages: Input should be a valid list")
    cache_marks = _count_cache_marks(body.get("system")) + _count_cache_marks(body.get("tools"))
    for i, message in enumerate(messages):
        _check_message(i, message, final=i == len(messages) - 1, model=str(body["model"]))
        cache_marks += _count_cache_marks(message.get("content"))
    if cache_marks > 4:
        raise invalid(
            f"A maximum of 4 blocks with cache_control may be provided. Found {cache_marks}."
        )
    if (problem := anthropic_format_problem(body.get("output_config"))) is not None:
        raise invalid(problem)
    _check_tool_pairing(messages)
    thinking = body.get("thinking") or {}
    _check_thinking(messages, enabled=thinking.get("type") in ("enabled", "adaptive"))


def blocks_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of a message (a string is one text block)."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _check_message(i: int, message: Any, *, final: bool, model: str) -> None:
    if not isinstance(message, dict):
        raise invalid(f"messages.{i}: Input should be a valid dictionary")
    role = message.get("role")
    if role == "system":
        raise invalid(
            'messages: Unexpected role "system". The Messages API accepts a top-level '
            '`system` parameter, not "system" as an input message role.'
        )
    if role not in ("user", "assistant"):
        raise invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
    content = message.get("content")
    if content in ("", [], None) and not (final and role == "assistant"):
        raise invalid(
            f"messages.{i}: all messages must have non-empty content except for the "
            "optional final assistant message"
        )
    if isinstance(content, str):
        return
    for j, block in enumerate(content):
        _check_block(f"messages.{i}.content.{j}", block, model)


def _check_block(loc: str, block: Any, model: str) -> None:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind not in BLOCK_TAGS:
        tags = ", ".join(f"'{t}'" for t in BLOCK_TAGS)
        raise invalid(
            f"{loc}: Input tag '{kind}' found using 'type' does not match any of the "
            f"expected tags: {tags}"
        )
    if kind == "text":
        _check_text(block.get("text"))
    elif kind == "image":
        _check_image(f"{loc}.image", block.get("source") or {})
    elif kind == "tool_use":
        _check_id(f"{loc}.tool_use.id", block.get("id"))
        if not isinstance(block.get("input"), dict):
            raise invalid(f"{loc}.tool_use.input: Input should be a valid dictionary")
    elif kind == "tool_result":
        _check_id(f"{loc}.tool_result.tool_use_id", block.get("tool_use_id"))
        inner = block.get("content")
        for k, part in enumerate(inner if isinstance(inner, list) else []):
            _check_block(f"{loc}.tool_result.content.{k}", part, model)
    elif kind == "thinking":
        signature = block.get("signature")
        if not signature_ok(signature, model, "thinking", str(block.get("thinking"))):
            raise invalid(f"{loc}: Invalid `signature` in `thinking` block")
    elif kind == "redacted_thinking" and not redacted_ok(model, block.get("data")):
        raise invalid(f"{loc}: Invalid `data` in `redacted_thinking` block")
    _check_cache_control(f"{loc}.{kind}", block.get("cache_control"))


def _check_text(text: Any) -> None:
    if not isinstance(text, str) or text == "":
        raise invalid("messages: text content blocks must be non-empty")
    if not text.strip():
        raise invalid("messages: text content blocks must contain non-whitespace text")


def _check_image(loc: str, source: dict[str, Any]) -> None:
    kind = source.get("type")
    if kind == "base64":
        if source.get("media_type") not in MEDIA_TYPES:
            raise invalid(
                f"{loc}.source.base64.media_type: Input should be 'image/jpeg', "
                "'image/png', 'image/gif' or 'image/webp'"
            )
        if not source.get("data"):
            raise invalid(f"{loc}.source.base64.data: Field required")
    elif kind == "url":
        url = source.get("url")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise invalid(f"{loc}.source.url.url: Input should be a valid URL")
    elif kind != "file":
        raise invalid(
            f"{loc}.source: Input tag '{kind}' found using 'type' does not match any of "
            "the expected tags: 'base64', 'url', 'file'"
        )


def _check_id(loc: str, value: Any) -> None:
    if not isinstance(value, str):
        raise invalid(f"{loc}: Input should be a valid string")
    if len(value) > 64:
        raise invalid(f"{loc}: String should have at most 64 characters")
    if not ID_PATTERN.match(value):
        raise invalid(f"{loc}: String should match pattern '^[a-zA-Z0-9_-]+$'")


def _check_cache_control(loc: str, cache_control: Any) -> None:
    if cache_control is None:
        return
    if not isinstance(cache_control, dict) or cache_control.get("type") != "ephemeral":
        raise invalid(f"{loc}.cache_control.type: Input should be 'ephemeral'")
    if cache_control.get("ttl", "5m") not in ("5m", "1h"):
        raise invalid(f"{loc}.cache_control.ephemeral.ttl: Input should be '5m' or '1h'")


def _count_cache_marks(value: Any) -> int:
    if isinstance(value, list):
        return sum(_count_cache_marks(item) for item in value)
    if isinstance(value, dict):
        own = 1 if value.get("cache_control") is not None else 0
        return own + _count_cache_marks(value.get("content"))
    return 0


def _tool_use_ids(message: dict[str, Any]) -> list[str]:
    if message.get("role") != "assistant":
        return []
    return [b.get("id", "") for b in blocks_of(message) if b.get("type") == "tool_use"]


def _missing(i: int, ids: list[str]) -> Refusal:
    return invalid(
        f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
        f"after: {', '.join(ids)}. Each `tool_use` block must have a corresponding "
        "`tool_result` block in the next message."
    )


def _check_tool_pairing(messages: list[dict[str, Any]]) -> None:
    pending: list[str] = []
    for i, message in enumerate(messages):
        blocks = blocks_of(message)
        results = [(j, b) for j, b in enumerate(blocks) if b.get("type") == "tool_result"]
        for j, block in results:
            if block.get("tool_use_id") not in pending or message.get("role") != "user":
                raise invalid(
                    f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                    f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` "
                    "block must have a corresponding `tool_use` block in the previous message."
                )
        if pending:
            leading = next(
                (j for j, b in enumerate(blocks) if b.get("type") != "tool_result"), len(blocks)
            )
            if results and leading < len(results):
                raise invalid(
                    f"messages.{i}: Did not find {len(pending)} `tool_result` block(s) at the "
                    "beginning of this message. Messages following `tool_use` blocks must "
                    "begin with a matching number of `tool_result` blocks."
                )
            answered = {b.get("tool_use_id") for _, b in results}
            missing = [tool_id for tool_id in pending if tool_id not in answered]
            if missing:
                raise _missing(i - 1, missing)
        pending = _tool_use_ids(message)
    if pending:
        raise _missing(len(messages) - 1, pending)


def _check_thinking(messages: list[dict[str, Any]], *, enabled: bool) -> None:
    if not messages:
        return
    last = messages[-1]
    if not enabled:
        if last.get("role") == "assistant":
            for j, block in enumerate(blocks_of(last)):
                if block.get("type") in ("thinking", "redacted_thinking"):
                    raise invalid(
                        f"messages.{len(messages) - 1}.content.{j}: When thinking is disabled, "
                        "an `assistant` message in the final position cannot contain "
                        "`thinking`. To use thinking blocks, enable `thinking` in your request."
                    )
        return
    if last.get("role") != "user" or not any(
        b.get("type") == "tool_result" for b in blocks_of(last)
    ):
        return
    start = _turn_start(messages)
    if start is None:
        return
    blocks = blocks_of(messages[start])
    first = blocks[0].get("type") if blocks else None
    if first not in ("thinking", "redacted_thinking"):
        raise invalid(
            f"messages.{start}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
            f"found `{first}`. When `thinking` is enabled, a final `assistant` message must "
            "start with a thinking block (preceeding the lastmost set of `tool_use` and "
            "`tool_result` blocks). We recommend you include thinking blocks from previous "
            "turns. To avoid this requirement, disable `thinking`. Please consult our "
            f"documentation at {THINKING_DOCS}"
        )


def _turn_start(messages: list[dict[str, Any]]) -> int | None:
    """Index of the first assistant message of the final assistant turn (tool loop)."""
    start = None
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if message.get("role") == "assistant":
            start = i
        elif not any(b.get("type") == "tool_result" for b in blocks_of(message)):
            break
    return start
