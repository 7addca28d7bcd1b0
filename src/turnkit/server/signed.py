"""The bodies the signed routes take, as JSON Schema for ``/openapi.json``.

Documentation only: these routes read the raw bytes (the signature is over
them), and the webhook and channel handlers check what they find, naming
the field that is wrong. The schemas say what a sender sends (other
fields are allowed, and ignored), so clients and fuzzers can build one.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LINEAR_BODY", "SLACK_BODY", "WEBHOOK_BODY", "request_body"]

_STRING = {"type": "string"}
_SLACK_TS = {"type": "string", "pattern": r"^[0-9]{1,12}(\.[0-9]{1,9})?$"}

WEBHOOK_BODY: dict[str, Any] = {
    "description": "any JSON value (at most 256 KiB): the payload of the webhook's input",
}

_SLACK_EVENT = {
    "type": "object",
    "properties": {
        "type": {"type": "string", "enum": ["app_mention", "message"]},
        "user": _STRING,
        "text": _STRING,
        "ts": _SLACK_TS,
        "thread_ts": _SLACK_TS,
        "channel": _STRING,
        "channel_type": {"type": "string", "enum": ["channel", "im", "group"]},
        "bot_id": _STRING,
        "subtype": _STRING,
    },
    "required": ["type", "user", "text", "ts", "channel"],
}

SLACK_BODY: dict[str, Any] = {
    "description": "a Slack Events API envelope: url_verification or event_callback",
    "oneOf": [
        {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["url_verification"]},
                "challenge": _STRING,
                "token": _STRING,
            },
            "required": ["type", "challenge"],
        },
        {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["event_callback"]},
                "team_id": _STRING,
                "api_app_id": _STRING,
                "event_id": _STRING,
                "event_time": {"type": "integer"},
                "authorizations": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"user_id": _STRING, "is_bot": {"type": "boolean"}},
                    },
                },
                "event": _SLACK_EVENT,
            },
            "required": ["type", "team_id", "event", "event_id", "authorizations"],
        },
    ],
}

_LINEAR_SESSION = {
    "type": "object",
    "properties": {
        "id": _STRING,
        "issue": {"type": "object", "properties": {"id": _STRING, "title": _STRING}},
        "comment": {"type": "object", "properties": {"id": _STRING, "body": _STRING}},
        "creator": {"type": "object", "properties": {"id": _STRING}},
    },
    "required": ["id"],
}
_LINEAR_ACTIVITY = {
    "type": "object",
    "properties": {
        "id": _STRING,
        "signal": _STRING,
        "content": {"type": "object", "properties": {"type": _STRING, "body": _STRING}},
    },
    "required": ["id", "content"],
}
_LINEAR_COMMON = {
    "type": {"type": "string", "enum": ["AgentSessionEvent"]},
    "webhookTimestamp": {"type": "number", "description": "UNIX milliseconds"},
    "createdAt": {"type": "string", "format": "date-time"},
    "organizationId": _STRING,
    "appUserId": _STRING,
    "agentSession": _LINEAR_SESSION,
    "guidance": {},
}
_LINEAR_REQUIRED = ["type", "action", "webhookTimestamp", "agentSession", "organizationId"]

LINEAR_BODY: dict[str, Any] = {
    "description": "a Linear AgentSessionEvent webhook: created or prompted",
    "oneOf": [
        {
            "type": "object",
            "properties": _LINEAR_COMMON
            | {
                "action": {"type": "string", "enum": ["created"]},
                "previousComments": {"type": "array", "items": {"type": "object"}},
                "promptContext": _STRING,
            },
            "required": _LINEAR_REQUIRED,
        },
        {
            "type": "object",
            "properties": _LINEAR_COMMON
            | {
                "action": {"type": "string", "enum": ["prompted"]},
                "agentActivity": _LINEAR_ACTIVITY,
            },
            "required": [*_LINEAR_REQUIRED, "agentActivity"],
        },
    ],
}


def request_body(schema: dict[str, Any]) -> dict[str, Any]:
    """``openapi_extra`` documenting a required JSON body of ``schema``."""
    content = {"application/json": {"schema": schema}}
    return {"requestBody": {"required": True, "content": content}}
