"""``app.slack(...)``, ``app.linear(...)`` and ``app.handle_channel(...)``: the App's channel
methods, mixed into ``turnkit.App`` by :mod:`turnkit.app` (sessions know nothing of them)."""

from __future__ import annotations

from typing import Any

from turnkit.channels.base import ChannelResponse, problem
from turnkit.channels.hub import ChannelHub

__all__ = ["ChannelMethods"]


class ChannelMethods:
    """Channel methods of an App; its channels run as one extension (a :class:`ChannelHub`)."""

    agents: dict[str, Any]
    _channel_hub: ChannelHub | None = None

    @property
    def channel_hub(self) -> ChannelHub:
        """The App's channels and their delivery (made, and added to the App, on first use)."""
        if self._channel_hub is None:
            if self.started:  # type: ignore[attr-defined]
                raise RuntimeError("configure channels before the App starts")
            self._channel_hub = ChannelHub()
            self.extend(self._channel_hub)  # type: ignore[attr-defined]
        return self._channel_hub

    def slack(
        self, agent: str, signing_secret: str, bot_token: str, api_url: str | None = None
    ) -> Any:
        """Talk to ``agent`` in Slack: mentions and direct messages, one session per thread.

        ``signing_secret`` checks requests at ``POST /channels/slack/events``;
        replies are posted with ``bot_token``; ``api_url`` is the Web API's
        base (tests point it at a fake). Returns the ``SlackChannel``.
        """
        from turnkit.channels.setup import add_channel

        secret, token = ("signing_secret", signing_secret), ("bot_token", bot_token)
        return add_channel(self.channel_hub, self.agents, "slack", agent, secret, token, api_url)

    def linear(
        self, agent: str, webhook_secret: str, access_token: str, api_url: str | None = None
    ) -> Any:
        """Be ``agent`` in Linear's agent sessions (delegated or mentioned on issues).

        ``webhook_secret`` checks deliveries at ``POST /channels/linear/webhook``;
        activities are created with ``access_token`` (an OAuth token goes as
        Bearer, a ``lin_api_`` key as is) at ``api_url`` (the GraphQL
        endpoint). Returns the ``LinearChannel``.
        """
        from turnkit.channels.setup import add_channel

        secret, token = ("webhook_secret", webhook_secret), ("access_token", access_token)
        hub = self.channel_hub
        return add_channel(hub, self.agents, "linear", agent, secret, token, api_url)

    @property
    def channels(self) -> dict[str, Any]:
        """The configured channels, by provider (``"slack"``, ``"linear"``)."""
        return {} if self._channel_hub is None else dict(self._channel_hub.channels)

    async def handle_channel(self, provider: str, headers: Any, body: bytes) -> ChannelResponse:
        """Answer one request of a channel (``"slack"`` or ``"linear"``): its raw body and
        headers in, a ``ChannelResponse`` (status, JSON body) out. Signed requests only."""
        _ = self.runtime  # type: ignore[attr-defined]  # raises unless the App is started
        channel = self.channels.get(provider)
        if channel is None:
            return problem(404, f"no {provider!r} channel is configured on this App")
        return await channel.handle(self, headers, body)
