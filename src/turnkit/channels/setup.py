"""Configuring an App's channels (``app.slack``, ``app.linear``): checked arguments."""

from __future__ import annotations

from typing import Any

from turnkit.channels.hub import ChannelHub
from turnkit.errors import UnknownAgentError

__all__ = ["add_channel"]


def add_channel(
    hub: ChannelHub,
    agents: dict[str, Any],
    provider: str,
    agent: str,
    secret: tuple[str, object],
    token: tuple[str, object],
    api_url: object,
) -> Any:
    """Check the arguments of ``app.<provider>(...)`` and add that channel; the channel.

    ``secret`` and ``token`` are (argument name, value) pairs, so that an
    error names the argument.
    """
    from turnkit.channels.linear import LinearChannel
    from turnkit.channels.slack import SlackChannel

    where = f"app.{provider}"
    if agent not in agents:
        raise UnknownAgentError(agent, tuple(agents))
    if hub.started:
        raise RuntimeError(f"{where}: configure channels before the App starts")
    if provider in hub.channels:
        raise ValueError(f"{where}: the channel is already configured")
    kind = SlackChannel if provider == "slack" else LinearChannel
    url = api_url if api_url is not None else kind.__dataclass_fields__["api_url"].default
    if type(url) is not str or not url.startswith(("http://", "https://")):
        raise ValueError(f"{where}: api_url must be an http:// or https:// URL, got {url!r}")
    values = []
    for name, value in (secret, token):
        if type(value) is not str or not value.strip():
            raise ValueError(f"{where}: {name} must be a non-empty string")
        values.append(value)
    channel = hub.channels[provider] = kind(agent, values[0], values[1], url)
    return channel
