"""What the OpenAI Responses API refuses in ``input``, with its real error texts.

Sources (public issue threads quoting the API's 400 bodies, all
``invalid_request_error`` with ``param: "input"`` unless noted):
- "No tool output found for function call …": tjardoo/openai-client#124
- "No tool call found for function call output with call_id …": microsoft/vscode#320060
- "Item '…' of type 'reasoning' was provided without its required following item.":
  continuedev/continue#8933; also when the item it preceded follows without its id
  (mastra-ai/mastra#11103 reproduces it against the API: an id-less assistant message after
  a reasoning item is refused, the same message with its ``msg_`` id is accepted)
- "Item '…' of type 'function_call' was provided without its required 'reasoning' item: '…'.":
  cline/cline#12242 (and the same for 'message': continuedev/continue#12620)
- "Item with id '…' not found. Items are not persisted when `store` is set to false. …":
  anomalyco/opencode#7724, #8987
- "Duplicate item found with id …. Remove duplicate items from your input and try again.":
  OpenRouterTeam/ai-sdk-provider#254
- "The encrypted content for item … could not be verified. Reason: Encrypted content could
  not be decrypted or parsed." (``param: null``, ``code: invalid_encrypted_content``):
  smallmain/vscode-unify-chat-provider#178
- "Invalid 'input[N].call_id': string too long … maximum length 64 …": AnswerDotAI/fastllm#45
- input_image data URLs: anomalyco/opencode#23983
Reconstructed (wording not seen verbatim): content part types not allowed for a role,
the store=true "Item with id '…' not found." and "Previous response with id '…' not found.".
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from ._openai_common import check_image_url, error_envelope, invalid, too_long
from ._server import Refusal
from ._tokens import decode_b64, mac

INPUT_PARTS: Final = ("input_text", "input_image", "input_file")
OUTPUT_PARTS: Final = ("output_text", "refusal")
ENCRYPTED_PREFIX: Final = "gAAAAAB"
NOT_PERSISTED: Final = (
    "Items are not persisted when `store` is set to false. Try again with `store` set to true, "
    "or remove this item from your input."
)


@dataclass
class Registry:
    """What the fake remembers of the items it issued (as the real API encodes in its ids)."""

    stored: dict[str, dict[str, Any]] = field(default_factory=dict)
    reasoning_of: dict[str, str] = field(default_factory=dict)
    follower_of: dict[str, str] = field(default_factory=dict)  # reasoning id -> next item id
    responses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def encrypted_content(item_id: str) -> str:
    """The opaque ``encrypted_content`` the fake issues for reasoning item ``item_id``."""
    return (
        ENCRYPTED_PREFIX + base64.urlsafe_b64encode(item_id.encode() + mac("rs", item_id)).decode()
    )


def encrypted_ok(token: object) -> bool:
    """Whether ``token`` is an ``encrypted_content`` the fake issued."""
    if not isinstance(token, str) or not token.startswith(ENCRYPTED_PREFIX):
        return False
    raw = decode_b64(token[len(ENCRYPTED_PREFIX) :])
    if raw is None or len(raw) <= 32:
        return False
    return raw[-32:] == mac("rs", raw[:-32].decode(errors="replace"))


def input_items(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``input`` as a list of items (a string is one user message)."""
    value = body.get("input")
    if isinstance(value, str):
        return [{"type": "message", "role": "user", "content": value}]
    return [item for item in value or [] if isinstance(item, dict)]


def item_type(item: Mapping[str, Any]) -> str:
    """An item's type; a bare ``{"role", "content"}`` is a message."""
    return str(item.get("type") or ("message" if "role" in item else ""))


def validate_input(body: Mapping[str, Any], registry: Registry) -> list[dict[str, Any]]:
    """Raise the refusal the real API would give; return the prior items of the
    ``previous_response_id`` chain (empty without one)."""
    if "model" not in body:
        raise invalid("Missing required parameter: 'model'.", "model", "missing_required_parameter")
    prior = _prior_items(body, registry)
    items = input_items(body)
    store = body.get("store") is not False
    _check_duplicates(items)
    for i, item in enumerate(items):
        kind = item_type(item)
        if kind == "message":
            _check_message(i, item)
        elif kind == "reasoning":
            _check_reasoning(i, item, items, store, registry)
        elif kind in ("function_call", "function_call_output"):
            call_id = str(item.get("call_id", ""))
            if len(call_id) > 64:
                raise too_long(f"input[{i}].call_id", call_id, 64)
        if kind == "function_call_output" and not _has_call(item.get("call_id"), prior + items[:i]):
            raise invalid(
                f"No tool call found for function call output with call_id {item.get('call_id')}.",
                "input",
            )
        _check_required_reasoning(item, prior + items[:i], registry)
    _check_unanswered(prior + items)
    return prior


def _prior_items(body: Mapping[str, Any], registry: Registry) -> list[dict[str, Any]]:
    previous = body.get("previous_response_id")
    if previous is None:
        return []
    if previous not in registry.responses:
        raise invalid(
            f"Previous response with id '{previous}' not found.",
            "previous_response_id",
            "previous_response_not_found",
        )
    return registry.responses[previous]


def _check_duplicates(items: list[dict[str, Any]]) -> None:
    seen: set[str] = set()
    for item in items:
        item_id = item.get("id")
        if item_id and item_type(item) != "item_reference":
            if item_id in seen:
                raise invalid(
                    f"Duplicate item found with id {item_id}. Remove duplicate items from your "
                    "input and try again.",
                    "input",
                )
            seen.add(item_id)


def _check_message(i: int, item: Mapping[str, Any]) -> None:
    role = item.get("role")
    content = item.get("content")
    if not isinstance(content, list):
        return
    allowed = OUTPUT_PARTS if role == "assistant" else INPUT_PARTS
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in allowed:
            listing = (
                " and ".join(f"'{v}'" for v in allowed)
                if len(allowed) == 2
                else (", ".join(f"'{v}'" for v in allowed[:-1]) + f", and '{allowed[-1]}'")
            )
            raise invalid(
                f"Invalid value: '{kind}'. Supported values are: {listing}.",
                f"input[{i}].content[{j}]",
                "invalid_value",
            )
        if kind == "input_image" and part.get("image_url") is not None:
            check_image_url(f"input[{i}].content[{j}].image_url", part.get("image_url"))


def _check_reasoning(
    i: int, item: Mapping[str, Any], items: list[dict[str, Any]], store: bool, registry: Registry
) -> None:
    item_id = item.get("id")
    token = item.get("encrypted_content")
    if token is not None:
        if not encrypted_ok(token):
            message = (
                f"The encrypted content for item {item_id} could not be verified. "
                "Reason: Encrypted content could not be decrypted or parsed."
            )
            raise Refusal(400, error_envelope(message, code="invalid_encrypted_content"))
    elif not store:
        raise invalid(f"Item with id '{item_id}' not found. {NOT_PERSISTED}", "input")
    elif item_id not in registry.stored:
        raise invalid(f"Item with id '{item_id}' not found.", "input")
    following = items[i + 1] if i + 1 < len(items) else None
    required = registry.follower_of.get(item_id) if isinstance(item_id, str) else None
    if (
        following is None
        or not _is_model_output(following)
        or (required is not None and following.get("id") != required)
    ):
        raise invalid(
            f"Item '{item_id}' of type 'reasoning' was provided without its required "
            "following item.",
            "input",
        )


def _is_model_output(item: Mapping[str, Any]) -> bool:
    kind = item_type(item)
    if kind == "message":
        return item.get("role") == "assistant"
    return kind.endswith("_call") and kind != "reasoning"


def _check_required_reasoning(
    item: Mapping[str, Any], before: list[dict[str, Any]], registry: Registry
) -> None:
    item_id = item.get("id")
    required = registry.reasoning_of.get(item_id) if isinstance(item_id, str) else None
    if required is None:
        return
    if not any(b.get("id") == required and item_type(b) == "reasoning" for b in before):
        raise invalid(
            f"Item '{item_id}' of type '{item_type(item)}' was provided without its required "
            f"'reasoning' item: '{required}'.",
            "input",
        )


def _has_call(call_id: Any, items: list[dict[str, Any]]) -> bool:
    return any(item_type(i) == "function_call" and i.get("call_id") == call_id for i in items)


def _check_unanswered(items: list[dict[str, Any]]) -> None:
    answered = {i.get("call_id") for i in items if item_type(i) == "function_call_output"}
    for item in items:
        if item_type(item) == "function_call" and item.get("call_id") not in answered:
            raise invalid(f"No tool output found for function call {item.get('call_id')}.", "input")
