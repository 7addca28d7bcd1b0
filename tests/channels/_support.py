"""Signed Slack and Linear deliveries, built from the documented algorithms."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa

SLACK_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
LINEAR_SECRET = "lin_wh_secret_for_tests"
BOT = "UBOT"
_events = itertools.count(1)


def slack_signature(secret: str, timestamp: str, body: bytes) -> str:
    """``v0=`` + hex HMAC-SHA256 of ``v0:{timestamp}:{body}`` (Slack's documented algorithm)."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


def slack_request(
    envelope: dict[str, Any], secret: str = SLACK_SECRET, at: float | None = None, **extra: str
) -> tuple[dict[str, str], bytes]:
    return slack_signed(json.dumps(envelope).encode(), secret, at, **extra)


def slack_signed(
    body: bytes, secret: str = SLACK_SECRET, at: float | None = None, **extra: str
) -> tuple[dict[str, str], bytes]:
    """Any body, signed as Slack signs (so malformed bodies can be signed too)."""
    timestamp = str(int(time.time() if at is None else at))
    headers = {
        "Content-Type": "application/json",
        "X-Slack-Request-Timestamp": timestamp,
        "X-Slack-Signature": slack_signature(secret, timestamp, body),
        **extra,
    }
    return headers, body


def slack_event(event: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
    """An ``event_callback`` envelope around ``event``, as Slack sends it."""
    return {
        "token": "unused-verification-token",
        "team_id": "T1",
        "api_app_id": "A1",
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_events):08d}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": "T1", "user_id": BOT, "is_bot": True}],
    }


def mention(text: str, ts: str, thread_ts: str | None = None, channel: str = "C1") -> dict:
    event = {"type": "app_mention", "user": "U1", "text": text, "ts": ts, "channel": channel}
    return event | ({} if thread_ts is None else {"thread_ts": thread_ts})


def message(text: str, ts: str, thread_ts: str | None = None, **more: Any) -> dict:
    event = {"type": "message", "user": "U1", "text": text, "ts": ts, "channel": "C1"}
    event |= {"channel_type": "channel"}
    return event | ({} if thread_ts is None else {"thread_ts": thread_ts}) | more


def linear_request(
    payload: dict[str, Any], secret: str = LINEAR_SECRET, skew_s: float = 0.0
) -> tuple[dict[str, str], bytes]:
    """A delivery signed as Linear signs: hex HMAC-SHA256 of the raw body."""
    stamped = payload | {"webhookTimestamp": int((time.time() + skew_s) * 1000)}
    return linear_signed(json.dumps(stamped).encode(), secret)


def linear_signed(body: bytes, secret: str = LINEAR_SECRET) -> tuple[dict[str, str], bytes]:
    """Any body, signed as Linear signs (so malformed bodies can be signed too)."""
    signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {"content-type": "application/json", "linear-signature": signature}, body


ISSUE = {
    "id": "iss-1",
    "identifier": "ENG-7",
    "title": "Checkout fails for EU cards",
    "url": "https://linear.app/acme/issue/ENG-7",
    "parent": {"id": "iss-0", "identifier": "ENG-1", "title": "Payments"},
    "creatorId": "app-user-1",
}


def linear_created(session_id: str = "as-1", **issue: Any) -> dict[str, Any]:
    return {
        "type": "AgentSessionEvent",
        "action": "created",
        "createdAt": "2026-11-30T23:59:00.000Z",
        "organizationId": "org-1",
        "oauthClientId": "client-1",
        "appUserId": "app-user-1",
        "webhookId": "wh-1",
        "agentSession": {
            "id": session_id,
            "status": "pending",
            "creator": {"id": "user-9", "name": "Ada"},
            "issue": ISSUE | issue,
            "comment": {"id": "com-2", "body": "@agent please look at this", "userId": "user-9"},
        },
        "previousComments": [{"id": "com-1", "body": "It fails since Monday", "userId": "u-2"}],
        "guidance": [{"body": "Answer in English.", "origin": {"type": "workspace"}}],
        "promptContext": "<issue identifier='ENG-7'>...</issue>",
    }


def linear_prompted(
    body: str, activity_id: str, session_id: str = "as-1", signal: str | None = None
) -> dict[str, Any]:
    activity: dict[str, Any] = {
        "id": activity_id,
        "agentSessionId": session_id,
        "userId": "user-9",
        "content": {"type": "prompt", "body": body},
    }
    if signal is not None:
        activity["signal"] = signal
    payload = linear_created(session_id) | {"action": "prompted", "agentActivity": activity}
    payload.pop("previousComments")
    return payload


def count_rows(db_url: str, table: str) -> int:
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar() or 0)
    finally:
        engine.dispose()


TAMPERINGS = ("wrong secret", "stale", "no signature", "body changed")


def tampered(
    build: Callable[..., tuple[dict[str, str], bytes]],
    payload: dict[str, Any],
    how: str,
    signature_header: str,
    **stale: Any,
) -> tuple[dict[str, str], bytes]:
    """A delivery spoiled one way of :data:`TAMPERINGS` (``stale``: the options that age it)."""
    if how == "wrong secret":
        return build(payload, secret="not-the-secret")
    if how == "stale":
        return build(payload, **stale)
    headers, body = build(payload)
    if how == "no signature":
        del headers[signature_header]
        return headers, body
    return headers, body.replace(b'"type"', b'"type" ', 1)  # same JSON, other bytes


def ask_message(question: str, *labels: str) -> dict[str, Any]:
    """An assistant message that calls ``ask`` with options (value = label, lower-cased)."""
    options = [{"label": label, "value": label.lower()} for label in labels]
    call = {"question": question, "options": options}
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "ask_1", "name": "ask", "input": call}],
    }
