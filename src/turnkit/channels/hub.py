"""The channels of one App, run as one App extension.

:class:`ChannelHub` is what sessions see of the channels: a turn-end
listener (it queues a linked session's reply in the ending transaction) and
a start/stop pair (the delivery task). Sessions import nothing from here;
:class:`~.methods.ChannelMethods` registers the hub with ``app.extend``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from turnkit.channels import outbox
from turnkit.sessions.db.store import TurnEnded, Tx

if TYPE_CHECKING:
    from turnkit.channels.delivery import Delivery
    from turnkit.sessions.app import App

__all__ = ["ChannelHub"]


class ChannelHub:
    """The configured channels (``{provider: channel}``) and their delivery."""

    def __init__(self) -> None:
        self.channels: dict[str, Any] = {}
        self.delivery: Delivery | None = None
        self.started = False

    def turn_ended(self, tx: Tx, ended: TurnEnded) -> None:
        outbox.queue_outcome(tx, ended, self.wake)

    def wake(self) -> None:
        """Look at the outbox now (from any thread)."""
        delivery = self.delivery
        if delivery is not None:
            delivery.wake()

    def start(self, app: App) -> None:
        from turnkit.channels.delivery import Delivery

        self.started = True
        if not self.channels:
            return
        runtime = app.runtime
        self.delivery = Delivery(runtime.store, self.channels, app.executor_id)
        runtime.notifier.on_change(self.wake)  # other processes' replies
        self.delivery.start()

    async def stop(self) -> None:
        self.started = False
        delivery, self.delivery = self.delivery, None
        if delivery is not None:
            await delivery.stop()
