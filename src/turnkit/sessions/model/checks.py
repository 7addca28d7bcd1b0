"""Checks of what callers and senders hand to an App: each failure names the field.

Every bound a database imposes is checked here first, the same on SQLite
and Postgres, so a bad value is an :class:`InvalidInputError` (a 4xx at the
server) rather than a driver error after part of the work is done:

- text columns cannot hold U+0000 on Postgres (SQLite takes it): refused in
  text, keys and ids alike. JSON values (payloads, data) may hold it: they
  are stored as JSON text, where it is the escape ``\\u0000``.
- keys and ids have column lengths (:data:`MAX_KEY_CHARS`, :data:`MAX_ID_CHARS`);
  an id from a provider is bounded so that every key built from it fits.
- a seq is compared with an INTEGER column, 32 bits on Postgres
  (:data:`MAX_SEQ`, for both databases alike); times must be ones a
  ``datetime`` can hold (:data:`MAX_UNIX_SECONDS`).

:func:`parse_json` is the one parser of untrusted bodies (webhooks, Slack,
Linear): bounded in depth and integer size, with a clear error.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from turnkit._values import dumps
from turnkit.errors import InvalidInputError, InvalidMessageError
from turnkit.messages import thaw
from turnkit.messages.checks import MAX_INT, MIN_INT, freeze_json
from turnkit.sessions.model.inputs import ON_BUSY, SOURCES, Channel
from turnkit.sessions.model.status import SessionState

__all__ = [
    "MAX_ID_CHARS",
    "MAX_KEY_CHARS",
    "MAX_PAYLOAD_BYTES",
    "MAX_PROVIDER_ID_CHARS",
    "MAX_SEQ",
    "MAX_UNIX_SECONDS",
    "check_channel",
    "check_data",
    "check_decisions",
    "check_id",
    "check_key",
    "check_limit",
    "check_on_busy",
    "check_payload",
    "check_seq",
    "check_session_key_setting",
    "check_session_status",
    "check_source",
    "check_text",
    "check_unix_seconds",
    "parse_json",
]

MAX_PAYLOAD_BYTES = 256 * 1024
MAX_KEY_CHARS = 500  # session keys and idempotency keys (their columns)
MAX_ID_CHARS = 64  # ids turnkit makes: sessions, turns, questions (``answers``)
MAX_PROVIDER_ID_CHARS = 200  # a Slack or Linear id: keys made of a prefix and one or two fit
MAX_SEQ = 2**31 - 1  # seq columns are INTEGER: 32 bits on Postgres (SQLite's hold 64)
MAX_UNIX_SECONDS = 253_402_300_799  # 9999-12-31T23:59:59Z, the last second a datetime holds
_DIGITS = 40  # an integer literal longer than this is out of range whatever it is


def check_text(value: object, field: str = "text") -> str | None:
    """A string (or None) that any text column can store."""
    if value is None:
        return None
    if type(value) is not str:
        raise InvalidInputError(field, f"must be a string or None, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InvalidInputError(field, f"is not valid Unicode text ({err.reason})") from None
    if "\x00" in value:
        at = value.index("\x00")
        raise InvalidInputError(
            field, f"holds U+0000 (NUL) at character {at}, which cannot be stored"
        )
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


def check_session_key_setting(
    value: object, where: str, every: str, function_of: str, default: str = ""
) -> None:
    """A webhook's or schedule's ``session_key``: a key (one session for ``every``
    fire or delivery), a function of ``function_of`` that returns the key, or None
    (``default`` says which session that is). ``ValueError`` naming ``where``."""
    if isinstance(value, str):
        try:
            check_key(value, "session_key")
        except InvalidInputError as err:
            raise ValueError(f"{where}: {err}") from None
    elif value is not None and not callable(value):
        raise ValueError(
            f"{where}: session_key must be a string (one session for every {every}), "
            f"a function of {function_of} that returns the session's key, or None"
            f"{default}; got {type(value).__name__}"
        )


def check_on_busy(value: object, field: str = "on_busy") -> str | None:
    """An input's policy for a busy session (None: its agent's)."""
    if value is not None and value not in ON_BUSY:
        raise InvalidInputError(field, f"must be one of {', '.join(ON_BUSY)}; got {value!r}")
    return value  # type: ignore[return-value]


def check_key(value: object, field: str, limit: int = MAX_KEY_CHARS) -> str | None:
    """A non-empty string of at most ``limit`` characters (or None)."""
    if value is None:
        return None
    if type(value) is not str or not value:
        raise InvalidInputError(field, f"must be a non-empty string or None, got {_short(value)}")
    if len(value) > limit:
        raise InvalidInputError(field, f"is {len(value)} characters long; at most {limit}")
    check_text(value, field)
    return value


def check_id(value: object, field: str = "session_id") -> str:
    """An id to look up: a non-empty string without U+0000 (no stored id holds one)."""
    if type(value) is not str or not value:
        raise InvalidInputError(field, f"must be a non-empty string, got {_short(value)}")
    check_text(value, field)
    return value


def check_seq(value: object, field: str = "after") -> int:
    """A position in a sequence (an event ``seq``): an int in 0..2**31-1."""
    if type(value) is not int or not 0 <= value <= MAX_SEQ:
        raise InvalidInputError(field, f"must be an int from 0 to {MAX_SEQ}, got {_short(value)}")
    return value


def check_limit(value: object, field: str = "limit") -> int | None:
    """How many items to return: None (all) or an int in 1..2**63-1."""
    if value is None:
        return None
    if type(value) is not int or not 1 <= value <= 2**63 - 1:
        raise InvalidInputError(
            field, f"must be None or an int from 1 to 2**63-1, got {_short(value)}"
        )
    return value


def check_unix_seconds(value: object, field: str) -> float:
    """A provider's UNIX time in seconds: a number from 1970 to the end of year 9999."""
    kind = type(value)
    if kind not in (int, float) or (kind is float and not math.isfinite(value)):  # type: ignore[arg-type]
        raise InvalidInputError(
            field, f"must be UNIX seconds (a finite number), got {_short(value)}"
        )
    if not 0 <= value <= MAX_UNIX_SECONDS:  # type: ignore[operator]
        raise InvalidInputError(field, f"is {_short(value)}, not a time from 1970 to 9999")
    return float(value)  # type: ignore[arg-type]


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


def parse_json(body: bytes, field: str = "body") -> Any:
    """An untrusted body as plain JSON data, checked once.

    Not UTF-8 or not JSON (``NaN`` and ``Infinity`` included): ``InvalidInputError``
    on ``field`` itself (a 400 at the server). JSON past the bounds every JSON
    value has (nesting depth, integers within 64 bits, sizes; see
    :class:`~turnkit.messages.JsonLimits`): ``InvalidInputError`` naming the
    place, e.g. ``body.event.ts`` (a 422).
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InvalidInputError(
            field, f"is not UTF-8 text ({err.reason} at byte {err.start})"
        ) from None
    try:
        value = json.loads(text, parse_int=_int, parse_constant=_constant)
    except RecursionError:
        raise InvalidInputError(field, "is nested too deeply to be read as JSON") from None
    except ValueError as err:  # JSONDecodeError, and _constant's refusal
        raise InvalidInputError(field, f"is not valid JSON ({err})") from None
    try:
        return thaw(freeze_json(value))
    except InvalidMessageError as err:
        raise InvalidInputError(err.within(field).path, err.problem) from None


def _int(literal: str) -> int:
    # Python refuses to convert more than 4,300 digits (ValueError, and slowly before
    # that): a literal this long is out of the 64-bit range, so it is read as a value
    # just past the range, which the bounds check then names with its place.
    if len(literal) <= _DIGITS:
        return int(literal)
    return MIN_INT - 1 if literal.startswith("-") else MAX_INT + 1


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _short(value: object) -> str:
    if type(value) is int and not MIN_INT <= value <= MAX_INT:
        return "an integer outside the 64-bit range"  # its repr may be too long to make
    try:
        text = repr(value)
    except Exception:  # a caller's object whose repr fails
        return f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


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
