"""Checks of what callers hand to an App: each failure names the argument."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from turnkit.errors import InvalidInputError, InvalidMessageError
from turnkit.messages._json import freeze_json, thaw
from turnkit.sessions._values import dumps
from turnkit.sessions.model.inputs import SOURCES, Channel
from turnkit.sessions.model.status import SessionState

__all__ = [
    "MAX_PAYLOAD_BYTES",
    "check_channel",
    "check_data",
    "check_decisions",
    "check_payload",
    "check_session_status",
    "check_text",
]

MAX_PAYLOAD_BYTES = 256 * 1024


def check_text(value: object, field: str = "text") -> str | None:
    if value is None:
        return None
    if type(value) is not str:
        raise InvalidInputError(field, f"must be a string or None, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidInputError(field, f"is not valid Unicode text ({err.reason})") from None
    return value


def check_payload(value: object, limit: int = MAX_PAYLOAD_BYTES, field: str = "payload") -> str:
    """The payload as stored JSON text (``null`` for None); refused past ``limit`` bytes."""
    try:
        frozen = freeze_json(value)
        text = dumps(thaw(frozen))
        size = len(text.encode("utf-8"))
    except InvalidMessageError as err:
        raise InvalidInputError(err.within(field).path, err.problem) from None
    except UnicodeEncodeError as err:
        raise InvalidInputError(
            field, f"holds text that is not valid Unicode ({err.reason})"
        ) from None
    if size > limit:
        raise InvalidInputError(
            field, f"is {size} bytes as JSON, over the limit of {limit} bytes ({limit // 1024} KiB)"
        )
    return text


def check_session_status(value: object) -> SessionState:
    try:
        return SessionState(value)
    except ValueError:
        states = ", ".join(state.value for state in SessionState)
        raise InvalidInputError("status", f"must be one of {states}; got {value!r}") from None


def check_source(value: object) -> str:
    if value not in SOURCES:
        raise InvalidInputError("source", f"must be one of {', '.join(SOURCES)}; got {value!r}")
    return value  # type: ignore[return-value]


def check_key(value: object, field: str) -> str | None:
    if value is None:
        return None
    if type(value) is not str or not value:
        raise InvalidInputError(field, f"must be a non-empty string or None, got {value!r}")
    if len(value) > 500:
        raise InvalidInputError(field, f"is {len(value)} characters long; at most 500")
    check_text(value, field)
    return value


def check_channel(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, Channel):
        return value.to_dict()
    if not isinstance(value, dict):
        raise InvalidInputError(
            "channel", f"must be a Channel or a dict, got {type(value).__name__}"
        )
    try:
        channel = Channel(**value)
    except TypeError as err:
        raise InvalidInputError("channel", str(err)) from None
    if channel.provider not in ("slack", "linear"):
        raise InvalidInputError(
            "channel.provider", f"must be 'slack' or 'linear', got {channel.provider!r}"
        )
    for name in ("connection_id", "workspace_id", "conversation_id", "user_id"):
        check_key(getattr(channel, name), f"channel.{name}")
    return channel.to_dict()


def check_data(value: object) -> dict[str, Any]:
    """Session data: a JSON object (None is an empty one)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInputError("data", f"must be a JSON object (dict), got {type(value).__name__}")
    check_payload(value, field="data")
    return thaw(freeze_json(value))


def check_decisions(value: object) -> Any:
    """``approve``'s decisions: True or False (for every held call), or a mapping of
    call ids to True, False, an :class:`~turnkit.Approval` or its fields as a dict
    (``{"approved", "reason"?, "input"?}``); as a bool or ``{call_id: Approval}``."""
    from turnkit.agent.approvals import Approval

    if type(value) is bool:
        return value
    if not isinstance(value, Mapping):
        raise InvalidInputError(
            "decisions",
            "must be True, False or a dict of {call_id: True | False | Approval}, "
            f"got {type(value).__name__}",
        )
    if not value:
        raise InvalidInputError("decisions", "is empty: give a decision for every waiting call")
    decisions: dict[str, Approval] = {}
    for call_id, decision in value.items():
        if type(call_id) is not str or not call_id:
            raise InvalidInputError(
                "decisions", f"call ids must be non-empty strings, got {call_id!r}"
            )
        field = f"decisions[{call_id!r}]"
        if type(decision) is bool:
            decision = Approval(decision)
        elif isinstance(decision, Mapping):
            decision = _approval_of(field, decision)
        elif not isinstance(decision, Approval):
            raise InvalidInputError(
                field, f"must be True, False, an Approval or a dict, got {type(decision).__name__}"
            )
        decisions[call_id] = decision
    return decisions


def _approval_of(field: str, fields: Mapping[str, Any]) -> Any:
    from turnkit.agent.approvals import Approval

    unknown = sorted(set(fields) - {"approved", "reason", "input"})
    if unknown:
        raise InvalidInputError(field, f"unknown field(s) {', '.join(map(repr, unknown))}")
    if "approved" not in fields:
        raise InvalidInputError(field, "needs 'approved' (true or false)")
    try:
        return Approval(fields["approved"], fields.get("reason"), fields.get("input"))
    except (TypeError, ValueError) as err:
        raise InvalidInputError(field, str(err)) from None
