"""Linear agent sessions: ``AgentSessionEvent`` webhooks in, agent activities out.

A webhook is signed with ``linear-signature``: the hex HMAC-SHA256 of the
raw body with the webhook secret, compared in constant time; its
``webhookTimestamp`` (milliseconds) must be within 60 s of now.

- ``created``: a session keyed by the agent session id; a ``thought``
  activity is queued before the input (Linear wants one within 10 s), and
  the input carries a :class:`LinearInputPayload`. What the session knows
  of its origin (the parent issue, whether this app created the issue) is
  read here, once, and kept with the session's link.
- ``prompted``: the person's text (``agentActivity.content.body``, or
  ``body``) is an input to the same session; it answers an open question.
  ``signal: "stop"`` cancels the running turn (reason ``stopped``) and posts
  a final ``response`` saying so.

A signed delivery that cannot be understood (not JSON, a value out of
bounds, a field of the wrong type) is answered 200 and dropped, with the
reason logged and in the answer: Linear retries every answer but a 200 (after
1 minute, 1 hour and 6 hours) and has no header to say "do not retry", so a
4xx would only bring the same unreadable body back three times.

Replies are GraphQL ``agentActivityCreate`` calls: each tool call an
``action``, the final text a ``response``, an ``ask`` an ``elicitation``, a
failed turn an ``error``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from turnkit.channels.base import (
    ChannelResponse,
    GiveUp,
    RetryLater,
    header,
    problem,
    provider_time,
    store_input,
)
from turnkit.channels.outbox import queue_notice
from turnkit.errors import InvalidInputError
from turnkit.sessions.db.inputs import NewInput
from turnkit.sessions.model import checks as check

__all__ = ["TOLERANCE_S", "LinearChannel", "LinearInputPayload", "sign"]

DEFAULT_API_URL = "https://api.linear.app/graphql"
MAX_BODY_BYTES = 1024 * 1024
TOLERANCE_S = 60.0
_PAYLOAD_BUDGET = 200 * 1024  # the payload's JSON kept under this (the limit is 256 KiB)
_MAX_ERROR_CHARS = 1000
_RETRYABLE_CODES = {"RATELIMITED", "INTERNAL_SERVER_ERROR", "SERVICE_UNAVAILABLE"}
log = logging.getLogger("turnkit.channels.linear")
ACTIVITY_MUTATION = (
    "mutation AgentActivityCreate($input: AgentActivityCreateInput!) {"
    " agentActivityCreate(input: $input) { success agentActivity { id } } }"
)


def sign(secret: str | bytes, body: bytes) -> str:
    """The ``linear-signature`` of ``body``: hex HMAC-SHA256 with the webhook secret."""
    key = secret.encode() if isinstance(secret, str) else secret
    return hmac.new(key, body, hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class LinearInputPayload:
    """The payload of a Linear input (``use_input().payload``, as a plain dict).

    ``issue`` and ``session`` are the webhook's ``agentSession.issue`` and
    ``agentSession`` (without the issue); ``comments`` the thread so far
    (``previousComments`` and the comment that started the session);
    ``guidance`` the workspace's and team's guidance for agents; ``origin``
    {``parent``: the parent issue or None, ``created_by_agent``: whether this
    app created the issue}, read when the session started.
    """

    issue: Any
    session: Any
    comments: tuple[Any, ...]
    guidance: Any
    origin: Any

    def to_dict(self) -> dict[str, Any]:
        return {
            "issue": self.issue,
            "session": self.session,
            "comments": list(self.comments),
            "guidance": self.guidance,
            "origin": self.origin,
        }

    @classmethod
    def from_payload(cls, payload: Any) -> LinearInputPayload:
        """Read it back from an input's payload."""
        from turnkit.messages import thaw

        data = thaw(payload)
        return cls(
            data.get("issue"),
            data.get("session"),
            tuple(data.get("comments") or ()),
            data.get("guidance"),
            data.get("origin"),
        )


@dataclass
class LinearChannel:
    """The Linear channel of an App (``app.linear(...)``)."""

    agent: str
    webhook_secret: str
    access_token: str
    api_url: str = DEFAULT_API_URL
    clock: Callable[[], float] = time.time  # tests freeze it
    provider: str = field(default="linear", init=False)
    _client: Any = field(default=None, init=False, repr=False)

    # -- webhooks ------------------------------------------------------------

    async def handle(self, app: Any, headers: Mapping[str, str], body: bytes) -> ChannelResponse:
        """Answer one webhook delivery (a signed POST)."""
        if len(body) > MAX_BODY_BYTES:
            return problem(413, f"the request body is over {MAX_BODY_BYTES} bytes")
        if not self._signed(header(headers, "linear-signature"), body):
            return problem(401, "the linear-signature header is missing or does not match")
        try:
            payload = check.parse_json(body)
            if not isinstance(payload, dict):
                raise InvalidInputError("body", "must be a JSON object (a Linear webhook)")
            if not self._fresh(payload.get("webhookTimestamp")):
                detail = f"webhookTimestamp is missing or more than {TOLERANCE_S:g} s away"
                return problem(401, detail)
            return await self._event(app, payload)
        except InvalidInputError as error:
            log.warning("dropped a signed Linear webhook that cannot be read: %s", error)
            return ChannelResponse(200, {"ok": False, "dropped": str(error)})

    def _fresh(self, stamp: Any) -> bool:
        """Whether ``webhookTimestamp`` (milliseconds) is a number within the tolerance."""
        if type(stamp) not in (int, float) or not math.isfinite(stamp):
            return False
        return abs(self.clock() - stamp / 1000) <= TOLERANCE_S

    async def _event(self, app: Any, payload: dict[str, Any]) -> ChannelResponse:
        if payload.get("type") != "AgentSessionEvent":
            return ChannelResponse(200, {"ok": True, "ignored": f"type {payload.get('type')!r}"})
        if payload.get("action") == "created":
            return await self._created(app, payload)
        if payload.get("action") == "prompted":
            return await self._prompted(app, payload)
        return ChannelResponse(200, {"ok": True, "ignored": f"action {payload.get('action')!r}"})

    def _signed(self, signature: str | None, body: bytes) -> bool:
        if not signature or not signature.isascii():
            return False
        return hmac.compare_digest(sign(self.webhook_secret, body), signature.strip().lower())

    async def _created(self, app: Any, payload: dict[str, Any]) -> ChannelResponse:
        session = _object(payload, "agentSession")
        session_id = _string(session, "id", "agentSession.")
        issue = session.get("issue") if isinstance(session.get("issue"), dict) else None
        comment = session.get("comment") if isinstance(session.get("comment"), dict) else None
        text = _first_text(
            comment and comment.get("body"),
            payload.get("promptContext"),
            issue and issue.get("title"),
        )
        creator = session.get("creator")
        user = creator.get("id") if isinstance(creator, dict) else session.get("creatorId")
        thought = {"type": "thought", "body": "Looking into it."}
        new = self._input(payload, session_id, text, user, f"linear:created:{session_id}")
        return await self._store(app, payload, session_id, new, thought)

    async def _prompted(self, app: Any, payload: dict[str, Any]) -> ChannelResponse:
        session = _object(payload, "agentSession")
        session_id = _string(session, "id", "agentSession.")
        activity = _object(payload, "agentActivity")
        activity_id = _string(activity, "id", "agentActivity.")
        if activity.get("signal") == "stop":
            return await self._stop(app, session_id, activity_id)
        content = activity.get("content") if isinstance(activity.get("content"), dict) else {}
        text = _first_text(content.get("body"), activity.get("body"))
        if text is None:
            raise InvalidInputError("agentActivity.content.body", "the prompt has no text")
        user = activity.get("userId") if isinstance(activity.get("userId"), str) else None
        new = self._input(payload, session_id, text, user, f"linear:activity:{activity_id}")
        return await self._store(app, payload, session_id, new, None)

    def _input(
        self, payload: dict[str, Any], session_id: str, text: str | None, user: Any, key: str
    ) -> NewInput:
        channel = {
            "provider": "linear",
            "connection_id": payload.get("appUserId"),
            "workspace_id": _string(payload, "organizationId", ""),
            "conversation_id": session_id,
            "user_id": user if isinstance(user, str) and user else None,
        }
        details = {
            "channel": check.check_channel(channel),
            "provider_time": _created_at(payload),
        }
        text = check.check_text(text, "agentActivity.content.body")
        return NewInput("channel", text, "null", details, idempotency_key=key)

    async def _store(
        self,
        app: Any,
        payload: dict[str, Any],
        session_id: str,
        new: NewInput,
        thought: dict[str, Any] | None,
    ) -> ChannelResponse:
        origin = _origin(payload)
        address = {"agent_session_id": session_id, "origin": origin}
        notice = None if thought is None else (thought, f"linear:thought:{session_id}")
        checked = _payload_json(payload, origin)  # a bad payload is refused before any write

        def with_payload(linked: dict[str, Any]) -> NewInput:
            kept = linked.get("origin")  # what the session learned when it started
            new.payload_json = checked if kept == origin else _payload_json(payload, kept)
            return new

        stored, receipt, _ = await store_input(
            app, self.agent, f"linear:{session_id}", "linear", address, new, notice, with_payload
        )
        if receipt is None:
            return ChannelResponse(200, {"ok": True, "ignored": "the session has ended"})
        body = {"ok": True, "session_id": stored.id, "input_id": receipt.input_id}
        return ChannelResponse(200, body | {"duplicate": receipt.duplicate})

    async def _stop(self, app: Any, session_id: str, activity_id: str) -> ChannelResponse:
        store = app.runtime.store
        found = await app.find_session(self.agent, f"linear:{session_id}")
        if found is None:
            return ChannelResponse(200, {"ok": True, "ignored": "no such session"})
        stopped = {"type": "response", "body": "Stopped, as you asked."}
        key = f"linear:stop:{activity_id}"
        wake = app.channel_hub.wake
        queued = await asyncio.to_thread(
            queue_notice, store, found.id, "linear", stopped, key, None, wake
        )
        if not queued:
            return ChannelResponse(200, {"ok": True, "duplicate": True})
        running = await asyncio.to_thread(app.runtime.cancel_running, found.id, "stopped")
        return ChannelResponse(200, {"ok": True, "session_id": found.id, "stopped": running})

    # -- replies -------------------------------------------------------------

    def posts(self, item: Any) -> list[dict[str, Any]]:
        """The activities an outbox row becomes, in order."""
        content = item.content
        if item.kind == "notice":
            return [content]
        if content["reason"] == "stopped":  # the stop's response, already queued, says it all
            return []
        activities: list[dict[str, Any]] = [
            {"type": "action", "action": a["name"], "parameter": a["parameter"]}
            | ({} if a["result"] is None else {"result": a["result"]})
            for a in content["actions"]
        ]
        final = _final(content)
        return [*activities, final]

    async def post(self, post: dict[str, Any], item: Any) -> None:
        """Create one agent activity in the session."""
        import httpx2

        if self._client is None:
            self._client = httpx2.AsyncClient(timeout=30, trust_env=False)
        token = self.access_token
        authorization = token if token.startswith("lin_api_") else f"Bearer {token}"
        variables = {"input": {"agentSessionId": item.address["agent_session_id"], "content": post}}
        try:
            response = await self._client.post(
                self.api_url,
                json={"query": ACTIVITY_MUTATION, "variables": variables},
                headers={"authorization": authorization},
            )
        except httpx2.TransportError as error:
            raise RetryLater(f"agentActivityCreate: {type(error).__name__}: {error}") from None
        _check_reply(response)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


_APPROVAL_HINT = "Reply approve or deny; any other reply denies, and is passed on as the reason."


def _final(content: dict[str, Any]) -> dict[str, Any]:
    question = content["question"]
    if question is not None:
        lines = [question["text"], *(f"- {o['label']}" for o in question.get("options") or ())]
        if question.get("approvals"):  # tool calls that wait for a person's yes
            lines.append(_APPROVAL_HINT)
        return {"type": "elicitation", "body": "\n".join(lines)}
    status, reason = content["status"], content["reason"]
    if status == "completed":
        return {"type": "response", "body": content["text"] or "Done."}
    if status == "failed":
        error = (content["error"] or "")[:_MAX_ERROR_CHARS]
        return {"type": "error", "body": f"The turn failed ({reason}): {error}".rstrip(": ")}
    return {"type": "response", "body": f"Stopped ({reason})."}


def _check_reply(response: Any) -> None:
    status = response.status_code
    if status == 429:
        raw = response.headers.get("retry-after")
        delay = float(raw) if raw and raw.replace(".", "", 1).isdigit() else None
        raise RetryLater("agentActivityCreate: HTTP 429 (rate limited)", delay)
    if status >= 500:
        raise RetryLater(f"agentActivityCreate: HTTP {status}")
    try:
        reply = response.json()
    except ValueError:
        raise GiveUp(f"agentActivityCreate: HTTP {status}, not JSON") from None
    errors = reply.get("errors") if isinstance(reply, dict) else None
    if errors:
        first = errors[0] if isinstance(errors[0], dict) else {}
        code = (first.get("extensions") or {}).get("code")
        message = f"agentActivityCreate: {first.get('message')} ({code or status})"
        raise (RetryLater if code in _RETRYABLE_CODES else GiveUp)(message)
    created = ((reply.get("data") or {}).get("agentActivityCreate") or {}) if reply else {}
    if status >= 400 or not created.get("success"):
        raise GiveUp(f"agentActivityCreate: HTTP {status}, success is not true")


def _object(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name)
    if not isinstance(value, dict):
        raise InvalidInputError(name, f"must be an object, got {type(value).__name__}")
    return value


def _string(data: dict[str, Any], name: str, where: str) -> str:
    """An id: at most 200 characters, so that the keys made of it fit their columns."""
    value = data.get(name)
    if type(value) is not str or not value:
        raise InvalidInputError(f"{where}{name}", f"must be a non-empty string, got {value!r}")
    return check.check_key(value, f"{where}{name}", check.MAX_PROVIDER_ID_CHARS) or ""


def _first_text(*candidates: Any) -> str | None:
    for candidate in candidates:
        if isinstance(candidate, str) and candidate.strip():
            return candidate
    return None


def _created_at(payload: dict[str, Any]) -> str:
    created = payload.get("createdAt")
    if isinstance(created, str):
        try:
            return datetime.fromisoformat(created.replace("Z", "+00:00")).isoformat()
        except ValueError:
            pass
    return provider_time(payload["webhookTimestamp"] / 1000, "webhookTimestamp")


def _origin(payload: dict[str, Any]) -> dict[str, Any]:
    """Where the issue came from: read once, when the session starts."""
    issue = payload["agentSession"].get("issue")
    issue = issue if isinstance(issue, dict) else {}
    parent = issue.get("parent")
    if not isinstance(parent, dict):
        parent = {"id": issue["parentId"]} if isinstance(issue.get("parentId"), str) else None
    creator = issue.get("creator")
    creator_id = creator.get("id") if isinstance(creator, dict) else issue.get("creatorId")
    app_user = payload.get("appUserId")
    return {"parent": parent, "created_by_agent": bool(app_user) and creator_id == app_user}


def _payload_json(payload: dict[str, Any], origin: Any) -> str:
    """The :class:`LinearInputPayload` as stored JSON, oldest comments dropped to fit."""
    session = payload["agentSession"]
    previous = payload.get("previousComments")
    if previous is not None and not isinstance(previous, list):
        found = type(previous).__name__
        raise InvalidInputError("previousComments", f"must be a list of comments, got {found}")
    comments = [c for c in previous or () if isinstance(c, dict)]
    comment = session.get("comment")
    if isinstance(comment, dict) and all(c.get("id") != comment.get("id") for c in comments):
        comments.append(comment)
    rest = {k: v for k, v in session.items() if k not in ("issue", "comment")}
    while True:
        value = LinearInputPayload(
            session.get("issue"), rest, tuple(comments), payload.get("guidance"), origin
        )
        text = check.check_payload(value.to_dict(), limit=1 << 30)
        if len(text.encode("utf-8")) <= _PAYLOAD_BUDGET or not comments:
            return check.check_payload(value.to_dict())
        comments.pop(0)
