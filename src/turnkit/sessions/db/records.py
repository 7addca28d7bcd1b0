"""Rows read back as records: a turn's row as a :class:`Turn`, an event's as an
:class:`Event` (JSON columns decoded anew for every reader)."""

from __future__ import annotations

import json
from typing import Any

from turnkit._values import when
from turnkit.sessions.model.inputs import AgentInput
from turnkit.sessions.model.records import Event, Question, Turn

__all__ = ["event_record", "turn_record"]


def turn_record(row: Any) -> Turn:
    question = None if row.question is None else Question.from_dict(json.loads(row.question))
    output_data = None if row.output_data is None else json.loads(row.output_data)
    return Turn(
        row.id,
        row.session_id,
        row.seq,
        row.status,
        AgentInput.from_dict(json.loads(row.input)),
        row.output,
        question,
        row.error,
        row.reason,
        when(row.started_at),
        when(row.ended_at),
        output_data,
    )


def event_record(row: Any) -> Event:
    return Event(
        row.id,
        row.seq,
        row.session_id,
        row.turn_id,
        row.type,
        when(row.timestamp),  # type: ignore[arg-type]
        json.loads(row.data),  # plain JSON, decoded anew for every reader
    )
