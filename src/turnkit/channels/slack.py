"""Slack: Events API requests in, ``chat.postMessage`` replies out, one session per thread.

Requests are checked with ``slack_sdk``'s :class:`SignatureVerifier` (HMAC
over ``v0:{timestamp}:{body}``, 5-minute window, constant-time compare).
``app_mention`` events and direct messages become ``source="channel"``
inputs; a plain message in a thread whose session waits on a question
answers it. The input's idempotency key is the message itself (channel and
``ts``): Slack's retries of an event (same ``event_id``) and the second
event one message can cause (``app_mention`` and ``message``) store one
input. Posts by bots (``bot_id``), the app's own included, are ignored.

A signed request that cannot be understood (not JSON, a value out of
bounds, a field of the wrong type) is a 400 problem naming the field, with
``X-Slack-No-Retry: 1``: Slack retries a failed delivery three times (at
once, after 1 and 5 minutes) unless that header says not to, and a body
that could not be read once will not be read on a retry either.

Replies are posted in the thread with ``slack_sdk``'s async ``WebClient``.
A 429 is not waited out inside the call: its ``Retry-After`` goes to the
outbox, which holds that thread's replies (and only those) until then
(:mod:`turnkit.channels.delivery`); other transient errors are retried by
the outbox with backoff; errors retrying cannot fix are recorded.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from turnkit._http import retry_after_seconds
from turnkit.channels.base import (
    ChannelResponse,
    GiveUp,
    RetryLater,
    header,
    problem,
    provider_time,
    store_input,
)
from turnkit.errors import InvalidInputError
from turnkit.sessions.db.inputs import NewInput
from turnkit.sessions.model import checks as check

__all__ = ["MAX_BODY_BYTES", "MAX_MESSAGE_CHARS", "SlackChannel", "split_message"]

DEFAULT_API_URL = "https://slack.com/api/"
MAX_BODY_BYTES = 1024 * 1024
MAX_MESSAGE_CHARS = 4000  # Slack asks for at most 4,000 characters per message's text
_USER_MESSAGE_SUBTYPES = (None, "file_share", "thread_broadcast")
_NO_RETRY = {"X-Slack-No-Retry": "1"}  # a refused body stays refused: Slack need not retry
# ok:false errors that a later try can fix; anything else is given up and recorded.
_TRANSIENT = {"ratelimited", "internal_error", "fatal_error", "service_unavailable", "timeout"}


def split_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> list[str]:
    """``text`` in pieces of at most ``limit`` characters, cut at a paragraph, a line
    or a space when one is in the second half of the piece."""
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        window = rest[:limit]
        cut = limit
        for separator in ("\n\n", "\n", " "):  # the coarsest break in the second half
            found = window.rfind(separator)
            if found >= limit // 2:
                cut = found
                break
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest:
        pieces.append(rest)
    return pieces


@dataclass(frozen=True, slots=True)
class _Message:
    team: str
    channel: str
    ts: str
    root_ts: str
    user: str | None
    text: str
    app_id: str | None
    kind: str  # "mention" | "dm" | "thread"


@dataclass
class SlackChannel:
    """The Slack channel of an App (``app.slack(...)``)."""

    agent: str
    signing_secret: str
    bot_token: str
    api_url: str = DEFAULT_API_URL
    clock: Any = None  # a slack_sdk.signature.Clock (tests freeze it); None: the real time
    provider: str = field(default="slack", init=False)
    _client: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        from slack_sdk.signature import Clock, SignatureVerifier

        self._verifier = SignatureVerifier(self.signing_secret, self.clock or Clock())

    # -- requests ------------------------------------------------------------

    async def handle(self, app: Any, headers: Mapping[str, str], body: bytes) -> ChannelResponse:
        """Answer one Events API request (a signed POST)."""
        if len(body) > MAX_BODY_BYTES:
            return problem(413, f"the request body is over {MAX_BODY_BYTES} bytes")
        if not self._signed(headers, body):
            return problem(
                401,
                "the Slack signature is missing or wrong, or X-Slack-Request-Timestamp is "
                "more than 5 minutes away",
            )
        try:
            envelope = check.parse_json(body)
            if not isinstance(envelope, dict):
                raise InvalidInputError("body", "must be a JSON object (an Events API envelope)")
            kind = envelope.get("type")
            if kind == "url_verification":
                challenge = envelope.get("challenge")
                if not isinstance(challenge, str):
                    raise InvalidInputError("challenge", "must be a string (url_verification)")
                return ChannelResponse(200, {"challenge": challenge})
            if kind != "event_callback":
                return ChannelResponse(200, {"ok": True, "ignored": f"envelope type {kind!r}"})
            return await self._event(app, envelope)
        except InvalidInputError as error:
            return problem(400, str(error), _NO_RETRY)

    def _signed(self, headers: Mapping[str, str], body: bytes) -> bool:
        timestamp = header(headers, "x-slack-request-timestamp")
        signature = header(headers, "x-slack-signature")
        try:
            return self._verifier.is_valid(body, timestamp, signature)
        except (ValueError, TypeError, UnicodeDecodeError):  # hostile headers or body
            return False

    async def _event(self, app: Any, envelope: dict[str, Any]) -> ChannelResponse:
        event = envelope.get("event")
        if not isinstance(event, dict):
            raise InvalidInputError("event", "must be an object")
        message, why = _read_message(envelope, event)
        if message is None:
            return ChannelResponse(200, {"ok": True, "ignored": why})
        key = f"slack:{message.team}:{message.channel}:{message.root_ts}"
        if message.kind == "thread" and not await _awaits_answer(app, self.agent, key):
            return ChannelResponse(200, {"ok": True, "ignored": "not addressed to the app"})
        channel = {
            "provider": "slack",
            "connection_id": message.app_id,
            "workspace_id": message.team,
            "conversation_id": f"{message.channel}:{message.root_ts}",
            "user_id": message.user,
        }
        details = {
            "channel": check.check_channel(channel),
            "provider_time": provider_time(float(message.ts), "event.ts"),
        }
        new = NewInput(
            "channel",
            check.check_text(message.text, "event.text"),
            "null",
            details,
            idempotency_key=f"slack:{message.channel}:{message.ts}",
        )
        address = {"channel": message.channel, "thread_ts": message.root_ts}
        session, receipt, _ = await store_input(app, self.agent, key, "slack", address, new)
        if receipt is None:
            return ChannelResponse(200, {"ok": True, "ignored": "the session has ended"})
        return ChannelResponse(
            200,
            {
                "ok": True,
                "session_id": session.id,
                "input_id": receipt.input_id,
                "duplicate": receipt.duplicate,
            },
        )

    # -- replies -------------------------------------------------------------

    def posts(self, item: Any) -> list[dict[str, str]]:
        """The messages an outbox row becomes, in order."""
        content = item.content
        if item.kind == "notice":
            text = content["text"]
        elif content["question"] is not None:
            text = _question_text(content["question"])
        elif content["status"] == "completed":
            text = content["text"] or ""
        elif content["status"] == "failed":
            text = f"Sorry, I could not finish this (the turn failed: {content['reason']})."
        else:
            text = ""  # cancelled: nothing to say in the thread
        return [{"text": piece} for piece in split_message(text)]

    async def post(self, post: dict[str, str], item: Any) -> None:
        """Post one message in the session's thread."""
        from aiohttp import ClientError
        from slack_sdk.errors import SlackApiError

        client = self._web_client()
        address = item.address
        try:
            await client.chat_postMessage(
                channel=address["channel"], thread_ts=address["thread_ts"], text=post["text"]
            )
        except SlackApiError as error:
            raise _api_failure(error) from None
        except (TimeoutError, OSError, ClientError) as error:  # connection trouble
            raise RetryLater(f"chat.postMessage: {type(error).__name__}: {error}") from None

    def _web_client(self) -> Any:
        if self._client is None:
            from slack_sdk.http_retry.builtin_async_handlers import (
                AsyncConnectionErrorRetryHandler,
            )
            from slack_sdk.web.async_client import AsyncWebClient

            self._client = AsyncWebClient(
                token=self.bot_token,
                base_url=self.api_url,
                timeout=30,
                # No rate-limit handler: its in-call sleep would hold a delivery
                # slot; the outbox waits out Retry-After for this thread alone.
                retry_handlers=[AsyncConnectionErrorRetryHandler()],
            )
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP session (on the loop that made it)."""
        client, self._client = self._client, None
        session = getattr(client, "session", None)
        if session is not None and not session.closed:
            await session.close()


def _read_message(envelope: dict[str, Any], event: dict[str, Any]) -> tuple[_Message | None, str]:
    """The message an event carries for the app, or None and why it is ignored."""
    kind = event.get("type")
    if kind not in ("app_mention", "message"):
        return None, f"event type {kind!r}"
    if event.get("bot_id") or event.get("subtype") == "bot_message":
        return None, "a bot's post"
    if event.get("subtype") not in _USER_MESSAGE_SUBTYPES:
        return None, f"message subtype {event.get('subtype')!r}"
    bot = _bot_user(envelope)
    user = _field(event, "user", required=False)
    if user is not None and user == bot:
        return None, "the app's own post"
    text = _field(event, "text", required=False) or ""
    thread_ts = _field(event, "thread_ts", required=False)
    if kind == "app_mention":
        where = "mention"
    elif event.get("channel_type") == "im":
        where = "dm"
    elif thread_ts is None:
        return None, "a channel message outside a thread"
    elif bot is not None and f"<@{bot}>" in text:
        return None, "a mention (its app_mention event carries it)"
    else:
        where = "thread"
    ts = _timestamp(_field(event, "ts"), "event.ts")
    if thread_ts is not None:
        _timestamp(thread_ts, "event.thread_ts")
    return _Message(
        team=_field(envelope, "team_id", where=""),
        channel=_field(event, "channel"),
        ts=ts,
        root_ts=thread_ts or ts,
        user=user,
        text=_without_mention(text, bot, where == "mention"),
        app_id=_field(envelope, "api_app_id", required=False, where=""),
        kind=where,
    ), ""


def _field(data: dict[str, Any], name: str, required: bool = True, where: str = "event.") -> Any:
    """A string field; ids at most 200 characters, so the keys made of them fit."""
    value = data.get(name)
    if value is None and not required:
        return None
    if type(value) is not str or not value:
        raise InvalidInputError(f"{where}{name}", f"must be a non-empty string, got {value!r}")
    if name == "text":
        return check.check_text(value, "event.text")
    return check.check_key(value, f"{where}{name}", check.MAX_PROVIDER_ID_CHARS)


def _timestamp(ts: str, field: str) -> str:
    """A Slack ``ts`` ("seconds.micros"), checked to be a time a datetime holds."""
    if not re.fullmatch(r"\d{1,12}(\.\d{1,9})?", ts):
        raise InvalidInputError(field, f"is not a Slack timestamp: {ts!r}")
    check.check_unix_seconds(float(ts), field)
    return ts


def _bot_user(envelope: dict[str, Any]) -> str | None:
    """The app's bot user id, from the envelope's ``authorizations``."""
    authorizations = envelope.get("authorizations")
    if authorizations is not None and not isinstance(authorizations, list):
        found = type(authorizations).__name__
        raise InvalidInputError("authorizations", f"must be a list of objects, got {found}")
    for entry in authorizations or ():
        user = entry.get("user_id") if isinstance(entry, dict) else None
        if isinstance(user, str) and entry.get("is_bot"):
            return user
    return None


def _without_mention(text: str, bot: str | None, mention: bool) -> str:
    if bot is not None:
        stripped = re.sub(rf"<@{re.escape(bot)}(\|[^>]*)?>", " ", text)
    elif mention:  # the bot's id is unknown: an app_mention starts with it
        stripped = re.sub(r"^\s*<@[A-Z0-9]+(\|[^>]*)?>", " ", text)
    else:
        stripped = text
    cleaned = re.sub(r"[ \t]{2,}", " ", stripped).strip()
    return cleaned or text


def _question_text(question: dict[str, Any]) -> str:
    lines = [question["text"]]
    if question.get("approvals"):  # tool calls that wait for a person's yes
        lines.append(
            "_Reply *approve* or *deny* in this thread; any other reply denies, "
            "and is passed on as the reason._"
        )
        return "\n".join(lines)
    lines.extend(f"• {option['label']}" for option in question.get("options") or ())
    lines.append("_Reply in this thread to answer._")
    return "\n".join(lines)


async def _awaits_answer(app: Any, agent: str, key: str) -> bool:
    session = await app.find_session(agent, key)
    return session is not None and session.status == "awaiting_input"


def _api_failure(error: Any) -> Exception:
    response = error.response
    status = getattr(response, "status_code", 200)
    code = response.get("error") if hasattr(response, "get") else None
    message = f"chat.postMessage: {code or status}"
    if status == 429:
        retry_after = retry_after_seconds(getattr(response, "headers", None))
        return RetryLater(message + " (rate limited)", retry_after)
    if status >= 500 or code in _TRANSIENT:
        return RetryLater(message)
    return GiveUp(message)
