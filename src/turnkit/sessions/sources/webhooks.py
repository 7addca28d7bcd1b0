"""Inbound webhooks, signed as Standard Webhooks v1, delivered as session inputs.

A delivery carries ``webhook-id``, ``webhook-timestamp`` (UNIX seconds) and
``webhook-signature`` (space-separated ``v1,<base64>`` entries: any match is
enough, which allows key rotation) over ``{id}.{timestamp}.{body}``. The
``standardwebhooks`` package parses the secret and computes the signature;
the checks around it are done here so that hostile headers (no comma, bad
base64, a body that is not UTF-8) are a clean refusal rather than an
exception, and so the clock can be given (tests verify the published vector).

The JSON body becomes the payload of an input with ``source="webhook"`` and
``webhook`` {``id``, ``message_id``}. The ``webhook-id`` deduplicates
deliveries of the webhook before ``session_key`` routes one: a replay goes to
the first delivery's session whatever its body, is answered as a duplicate
and stores nothing new, across restarts (:mod:`turnkit.sessions.db.webhooks`).

A signed body that cannot be understood is a 4xx problem naming the field
(400 when it is not JSON, 422 when a value is out of bounds): the sender
is often the App owner's own system, and its delivery log then says what to
fix. Standard Webhooks senders retry non-2xx answers a bounded number of
times, so a refusal does not loop forever.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import dataclasses
import hmac
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from turnkit._http import header
from turnkit.errors import (
    InvalidInputError,
    UnknownAgentError,
    WebhookNotFoundError,
    WebhookSignatureError,
)
from turnkit.sessions.db import webhooks as deliveries
from turnkit.sessions.db.inputs import NewInput
from turnkit.sessions.model import checks as check
from turnkit.sessions.model.records import Receipt

if TYPE_CHECKING:
    from turnkit.sessions.runtime.runtime import Runtime

__all__ = [
    "MAX_WEBHOOK_BODY_BYTES",
    "TOLERANCE_S",
    "WebhookDef",
    "WebhookDelivery",
    "define_webhook",
    "deliver_webhook",
    "verify_signature",
]

MAX_WEBHOOK_BODY_BYTES = 256 * 1024
TOLERANCE_S = 5 * 60
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_MAX_MESSAGE_ID = 200


@dataclasses.dataclass(frozen=True, slots=True)
class WebhookDef:
    """A webhook of an App, as checked by ``app.webhook``."""

    id: str
    agent: str
    verifier: Any  # standardwebhooks.Webhook
    session_key: Callable[[Any], str] | str | None  # a function of the payload, or a fixed key


@dataclasses.dataclass(frozen=True, slots=True)
class WebhookDelivery:
    """What a delivery did: the session it went to and the input's receipt.

    ``receipt.duplicate`` is True for a replayed ``webhook-id`` (nothing new stored).
    """

    webhook_id: str
    message_id: str
    session_id: str
    receipt: Receipt


def define_webhook(
    agents: dict[str, Any], webhook_id: object, agent: object, secret: object, session_key: object
) -> WebhookDef:
    """A checked :class:`WebhookDef`; ``ValueError`` naming the bad argument otherwise."""
    from standardwebhooks.webhooks import Webhook

    where = f"app.webhook({webhook_id!r})"
    if type(webhook_id) is not str or not _ID.fullmatch(webhook_id):
        raise ValueError(
            f"{where}: the id must be 1-100 letters, digits, _ . - (it is a URL path segment)"
        )
    if not isinstance(agent, str) or agent not in agents:
        raise UnknownAgentError(agent, tuple(agents))
    if not isinstance(secret, str | bytes) or not secret:
        raise ValueError(f"{where}: secret must be a 'whsec_...' string or the key's bytes")
    try:
        verifier = Webhook(secret)
    except Exception as err:  # binascii.Error, EmptyWebhookSecretError, RuntimeError
        raise ValueError(f"{where}: secret is not base64 after 'whsec_' ({err})") from None
    check.check_session_key_setting(session_key, where, "delivery", "the payload")
    return WebhookDef(webhook_id, agent, verifier, session_key)  # type: ignore[arg-type]


def _header(headers: Mapping[str, str], name: str) -> str:
    value = header(headers, name)
    if not value:
        raise WebhookSignatureError(f"the {name} header is missing")
    return value


def verify_signature(
    verifier: Any, headers: Mapping[str, str], body: bytes, now: float | None = None
) -> str:
    """Check a delivery's signature; its ``webhook-id``. ``WebhookSignatureError`` if not.

    ``headers`` are looked up by case-insensitive name. ``now`` (UNIX seconds,
    default the real time) is the clock the 5-minute tolerance is measured on.
    """
    message_id = _header(headers, "webhook-id")
    stamp_text = _header(headers, "webhook-timestamp")
    signatures = _header(headers, "webhook-signature")
    if len(message_id) > _MAX_MESSAGE_ID:
        raise WebhookSignatureError(f"webhook-id is longer than {_MAX_MESSAGE_ID} characters")
    if not message_id.isprintable():  # U+0000 included: it could not be stored
        raise WebhookSignatureError("webhook-id holds control characters")
    if not stamp_text.isascii() or not stamp_text.isdigit() or len(stamp_text) > 12:
        raise WebhookSignatureError("webhook-timestamp must be UNIX seconds (digits)")
    stamp = int(stamp_text)
    clock = time.time() if now is None else now
    if abs(clock - stamp) > TOLERANCE_S:
        raise WebhookSignatureError(
            f"webhook-timestamp {stamp} is more than {TOLERANCE_S // 60} minutes from now"
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise WebhookSignatureError("the body is not UTF-8 text") from None
    signed = verifier.sign(message_id, datetime.fromtimestamp(stamp, UTC), text)
    expected = base64.b64decode(signed.split(",", 1)[1])
    for entry in signatures.split(" "):
        version, _, value = entry.partition(",")
        if version != "v1" or not value:
            continue
        try:
            given = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            continue
        if hmac.compare_digest(expected, given):
            return message_id
    raise WebhookSignatureError("no v1 signature matches")


def parse_body(body: bytes) -> Any:
    """The delivery's JSON body; ``InvalidInputError`` (field ``body``) if it is not JSON,
    naming the place (``body.x``) when a value is out of bounds."""
    if len(body) > MAX_WEBHOOK_BODY_BYTES:
        raise InvalidInputError(
            "body", f"is {len(body)} bytes, over the limit of {MAX_WEBHOOK_BODY_BYTES} (256 KiB)"
        )
    return check.parse_json(body)


def _session_key(defn: WebhookDef, payload: Any) -> str:
    if defn.session_key is None:
        return f"webhook:{defn.id}"
    if isinstance(defn.session_key, str):
        return defn.session_key
    try:
        key = defn.session_key(payload)
    except Exception as err:
        raise InvalidInputError(
            "session_key", f"raised {type(err).__name__}: {err} on this payload"
        ) from None
    if key is None:
        raise InvalidInputError("session_key", "returned None for this payload")
    return check.check_key(key, "session_key")  # type: ignore[return-value]


async def deliver_webhook(
    runtime: Runtime,
    defn: WebhookDef | None,
    webhook_id: str,
    headers: Mapping[str, str],
    body: bytes,
    now: float | None = None,
) -> WebhookDelivery:
    """Verify a delivery to webhook ``defn`` and give its payload to the session it picks.

    Raises ``WebhookNotFoundError`` (no such webhook: ``defn`` is None),
    ``WebhookSignatureError`` (nothing stored), ``InvalidInputError`` (``body``
    not JSON or too large, ``session_key`` failing), ``SessionEndedError``.
    """
    if defn is None:
        raise WebhookNotFoundError(webhook_id)
    if len(body) > MAX_WEBHOOK_BODY_BYTES:
        parse_body(body)  # raises: too large
    message_id = verify_signature(defn.verifier, headers, body, now)
    payload = parse_body(body)
    new = NewInput(
        "webhook",
        None,
        check.check_payload(payload, field="body"),
        {"webhook": {"id": defn.id, "message_id": message_id}},
        f"webhook:{defn.id}:{message_id}",
    )
    store = runtime.store
    session_id = await asyncio.to_thread(deliveries.session_of, store, defn.id, message_id)
    if session_id is not None:  # a replay: where the first delivery went, whatever the body
        receipt = await asyncio.to_thread(runtime.accept, session_id, new)
        return WebhookDelivery(defn.id, message_id, session_id, receipt)
    key = _session_key(defn, payload)
    session_id, receipt = await asyncio.to_thread(
        deliveries.accept_delivery, store, defn.agent, key, defn.id, message_id, new
    )
    return WebhookDelivery(defn.id, message_id, session_id, receipt)
