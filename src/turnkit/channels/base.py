"""What the channels share: the handler's answer, storing an input, and post outcomes.

A channel handler is framework-agnostic: raw body bytes and headers in, a
:class:`ChannelResponse` (status and JSON) out, so any web framework can
mount it (``turnkit serve`` does, at ``/channels/slack/events`` and
``/channels/linear/webhook``). The input is durable before the handler
answers and the turn runs afterwards, so the provider gets its 2xx in time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from turnkit._http import PROBLEM_TYPE, header, problem_body
from turnkit.channels.outbox import link_session, queue_notice
from turnkit.errors import SessionEndedError
from turnkit.sessions.db.inputs import NewInput
from turnkit.sessions.model import checks as check
from turnkit.sessions.model.records import Receipt, Session

__all__ = ["ChannelResponse", "GiveUp", "RetryLater", "header", "problem", "store_input"]


@dataclass(frozen=True, slots=True)
class ChannelResponse:
    """What a channel handler answers: an HTTP status, a JSON body and headers.

    ``media_type`` is ``application/problem+json`` for refusals.
    """

    status: int
    body: dict[str, Any] = field(default_factory=dict)
    media_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def problem(status: int, detail: str, headers: dict[str, str] | None = None) -> ChannelResponse:
    """A refusal as ``application/problem+json`` (RFC 9457)."""
    return ChannelResponse(status, problem_body(status, detail), PROBLEM_TYPE, headers or {})


def provider_time(seconds: float, field: str) -> str:
    """A provider's UNIX time as the ISO string inputs store (``InvalidInputError`` naming
    ``field`` for a time no datetime holds)."""
    return datetime.fromtimestamp(check.check_unix_seconds(seconds, field), UTC).isoformat()


async def store_input(
    app: Any,
    agent: str,
    key: str,
    provider: str,
    address: dict[str, Any],
    new: NewInput,
    notice: tuple[dict[str, Any], str] | None = None,
    complete: Callable[[dict[str, Any]], NewInput] | None = None,
) -> tuple[Session, Receipt | None, dict[str, Any]]:
    """Get or create the session of ``key``, link it to the conversation, store ``new``.

    ``notice`` (content, dedupe key) is queued for the channel before the
    input, so it is posted before anything the input's turn says.
    ``complete(address)`` finishes the input from the link's address (what
    the session learned when it started). Returns the session, the receipt
    (None when the session has ended: a channel message to an ended session
    is dropped, not an error for the provider) and the address in force.
    """
    runtime = app.runtime
    store = runtime.store
    session, _ = await asyncio.to_thread(runtime.open_session, agent, key, {})
    address = await asyncio.to_thread(link_session, store, session.id, provider, address)
    if complete is not None:
        new = complete(address)
    if notice is not None:
        content, dedupe_key = notice
        wake = app.channel_hub.wake
        await asyncio.to_thread(
            queue_notice, store, session.id, provider, content, dedupe_key, None, wake
        )
    try:
        receipt = await asyncio.to_thread(runtime.accept, session.id, new)
    except SessionEndedError:
        return session, None, address
    return session, receipt, address


class RetryLater(Exception):
    """A post failed in a way retrying can fix (rate limit, server error, network)."""

    def __init__(self, message: str, delay_s: float | None = None) -> None:
        super().__init__(message)
        self.delay_s = delay_s


class GiveUp(Exception):
    """A post failed for good (bad token, unknown conversation, refused input)."""
