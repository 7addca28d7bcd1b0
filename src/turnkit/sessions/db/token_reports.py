"""The provider's count for a session's latest reply, read back for the next turn.

Compaction estimates a conversation from the input tokens the provider
reported for the latest reply, plus characters / 4 of that reply and what
follows (:func:`~turnkit.agent.compaction.estimate_tokens`). Within a turn
the loop keeps that count; across turns it is in the durable record: the
reply's model step holds the usage its request was billed. Reading it from
there (and not from memory) gives a replay after a crash the count the first
run had, so both decide to compact alike.

A count is only good for the conversation its request was built from: none
is given when a compaction was written after the reply (by a turn that then
failed, say), when the latest summary stands after it, or when the reply was
copied by a fork (the fork has no step of it).
"""

from __future__ import annotations

import json

import sqlalchemy as sa

from turnkit.agent.compaction import TokenReport
from turnkit.providers.base import Usage
from turnkit.sessions.db import schema as t
from turnkit.sessions.db.conversation import Conversation, Conversations, Stored
from turnkit.sessions.db.store import Store

__all__ = ["latest_reply", "latest_report"]


def latest_report(
    store: Store, conversations: Conversations, session_id: str, turn_id: str
) -> TokenReport | None:
    """The count for the session's latest reply before turn ``turn_id``.

    None when there is no such reply, its count is stale (see the module
    docstring), or its model step reported no input tokens. The
    conversation is the one the turn's claim read (kept in ``conversations``).
    """
    conversation = conversations.peek(session_id)
    if conversation is None:  # dropped since the claim read it: read it again
        with store.read() as conn:
            conversation = conversations.read_committed(conn, session_id)
    reply = latest_reply(conversation, turn_id)
    if reply is None:
        return None
    step = t.steps.c
    with store.read() as conn:
        rows = conn.execute(
            sa.select(step.key, step.result).where(
                step.turn_id == reply.turn_id, step.key.like("model:%"), step.status == "done"
            )
        ).all()
    content = reply.message.to_dict()["content"]
    for row in sorted(rows, key=lambda r: int(r.key.partition(":")[2]), reverse=True):
        result = json.loads(row.result)
        if result["message"]["content"] == content:  # the call that made this reply
            report = TokenReport.of(reply.message, Usage(**result["usage"]))
            return report if report.input_tokens > 0 else None
    return None


def latest_reply(conversation: Conversation, turn_id: str) -> Stored | None:
    """The last assistant message of the model's view written before turn ``turn_id``
    with no compaction written after it; None if there is none."""
    found = None
    for stored in reversed(conversation.entries):
        if stored.turn_id == turn_id:
            continue  # this turn's own (a replay): the first run had not written them
        if stored.message.type == "compaction":
            return None  # the latest summary stands after every reply: the view starts there
        if stored.message.role == "assistant":
            found = stored
            break
    if found is None:
        return None
    for summary in reversed(conversation.summaries):
        if summary.position < found.position:
            break
        if summary.turn_id != turn_id:
            return None  # compacted after the reply: its count is of messages since replaced
    return found
