"""What an operator sees of the processes on one database (``turnkit status``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["ExecutorInfo"]

ExecutorState = Literal["live", "lapsed", "released", "taking", "taken"]


@dataclass(frozen=True, slots=True)
class ExecutorInfo:
    """One executor id: who holds it, its lease, and the turn runners it has.

    ``state``: ``live`` (its lease is held), ``lapsed`` (not renewed in time: the
    process died or stalled; a live process is about to take its turns over),
    ``released`` (it stopped), ``taking`` / ``taken`` (``taken_by`` took its
    turns over). ``running``: session runners DBOS runs under this id now.
    """

    id: str
    host: str
    pid: int
    runs_turns: bool
    max_running: int
    state: ExecutorState
    started_at: float
    renewed_at: float
    lease_until: float
    taken_by: str | None
    taken_at: float | None
    running: int
