"""Compaction inside one agent run: what the loop keeps between model calls.

A run's conversation is its input followed by what it added. Once a
compaction happened, the model sees that summary and the messages from
``base`` on; a later model call starts from there, so the summary of a
summary replaces both. ``prompt()`` stores each compaction message in the
history at its place (:func:`with_compactions`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from turnkit.agent.compaction import Compaction, TokenReport, plan_compaction
from turnkit.messages import Message
from turnkit.providers.base import Model, Usage

__all__ = ["RunCompaction", "with_compactions"]

log = logging.getLogger("turnkit.agent")


class RunCompaction:
    """One run's compaction state.

    - ``summary``: the latest compaction message of this run, or None;
    - ``base``: the index (in the run's conversation) of the first message
      it keeps;
    - ``report``: the provider's count for the latest reply, dropped at each
      compaction (it counted the messages since replaced);
    - ``made``: every compaction of the run, with the index it goes before.
    """

    __slots__ = ("base", "made", "report", "summary")

    def __init__(self, report: TokenReport | None = None) -> None:
        self.summary: Message | None = None
        self.base = 0
        self.report = report
        self.made: list[tuple[int, Message]] = []

    def replied(self, reply: Message, usage: Usage) -> None:
        """Record the count of the request that ``reply`` answered."""
        if usage.input_tokens or usage.cache_read_tokens or usage.cache_write_tokens:
            self.report = TokenReport.of(reply, usage)

    async def context(
        self,
        conversation: tuple[Message, ...],
        compaction: Compaction,
        model: Model,
        summariser: Model | None,
    ) -> tuple[Message, ...]:
        """What the model sees of ``conversation``, compacted first when it is due.

        Raises :class:`~turnkit.ContextTooLongError` as :func:`plan_compaction` does.
        """
        if self.summary is None:
            messages, offset = conversation, 0
        else:
            messages, offset = (self.summary, *conversation[self.base :]), self.base - 1
        plan = await plan_compaction(
            messages, compaction, model, report=self.report, summariser=summariser
        )
        if plan.failure is not None:
            log.warning(
                "compaction skipped, the conversation goes on uncompacted: %s", plan.failure
            )
        if plan.message is not None:
            self.summary, self.base, self.report = plan.message, offset + plan.index, None
            self.made.append((self.base, plan.message))
        return plan.send


def with_compactions(
    messages: Sequence[Message], made: Sequence[tuple[int, Message]]
) -> list[Message]:
    """``messages`` with each compaction message inserted before the index it keeps."""
    out = list(messages)
    for index, message in sorted(made, key=lambda pair: pair[0], reverse=True):
        out.insert(index, message)
    return out
