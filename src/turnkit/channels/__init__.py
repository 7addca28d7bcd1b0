"""Channels: Slack and Linear conversations as durable agent sessions (SPEC section 7).

``app.slack(...)`` and ``app.linear(...)`` configure them; their handlers
take a request's raw body and headers and answer a
:class:`~turnkit.channels.base.ChannelResponse`; ``turnkit serve`` mounts
them at ``POST /channels/slack/events`` and ``POST /channels/linear/webhook``.
Replies go through the outbox (:mod:`turnkit.channels.outbox`) and the
delivery task (:mod:`turnkit.channels.delivery`); sessions see the channels
only as one App extension (:mod:`turnkit.channels.hub`).
"""

from __future__ import annotations

from turnkit.channels.base import ChannelResponse
from turnkit.channels.linear import LinearChannel, LinearInputPayload
from turnkit.channels.slack import SlackChannel

__all__ = ["ChannelResponse", "LinearChannel", "LinearInputPayload", "SlackChannel"]
