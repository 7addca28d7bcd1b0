"""``turnkit.App``: the sessions App with the channels' methods (Slack, Linear) mixed in.

The sessions package knows nothing of channels; this top-level module, which
knows both, puts them together: ``turnkit.App`` (and ``turnkit.sessions.App``,
its alias) is :class:`turnkit.sessions.app.App` plus
:class:`turnkit.channels.methods.ChannelMethods`.
"""

from __future__ import annotations

from turnkit.channels.methods import ChannelMethods
from turnkit.sessions.app import App as SessionsApp

__all__ = ["App"]


class App(ChannelMethods, SessionsApp):
    __doc__ = SessionsApp.__doc__
