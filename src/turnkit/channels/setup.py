"""Configuring an App's channels (``app.slack``, ``app.linear``) and starting their delivery."""

from __future__ import annotations

from typing import Any

from turnkit.errors import UnknownAgentError

__all__ = ["add_channel", "start_delivery"]


def add_channel(
    app: Any,
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
    if agent not in app.agents:
        raise UnknownAgentError(agent, tuple(app.agents))
    if app._core is not None:
        raise RuntimeError(f"{where}: configure channels before the App starts")
    if provider in app._channels:
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
    channel = app._channels[provider] = kind(agent, values[0], values[1], url)
    return channel


def start_delivery(core: Any, channels: dict[str, Any]) -> Any:
    """Start delivering the replies of ``channels``, woken by commits of this process
    and by other processes' changes; the running ``Delivery``."""
    from turnkit.channels.delivery import Delivery

    delivery = Delivery(core.store, channels)
    core.store.on_reply_queued = delivery.wake
    core.notifier.on_change(delivery.wake)
    delivery.start()
    return delivery
