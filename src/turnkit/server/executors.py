"""``GET /executors``: the processes on the App's database and their leases (guarded)."""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from turnkit.server.problems import responses

__all__ = ["ExecutorOut", "executor_routes"]


class ExecutorOut(BaseModel):
    """One executor id (see :class:`turnkit.sessions.model.executors.ExecutorInfo`)."""

    id: str
    host: str
    pid: int
    runs_turns: bool
    max_running: int
    state: str
    started_at: float
    renewed_at: float
    lease_until: float
    taken_by: str | None
    taken_at: float | None
    running: int


def executor_routes(app: Any, guard: Any) -> APIRouter:
    router = APIRouter(dependencies=[Depends(guard)], responses=responses(401))

    @router.get("/executors")
    async def executors() -> list[ExecutorOut]:
        """Every executor id on the database: who holds it, its lease, what it runs."""
        return [ExecutorOut(**dataclasses.asdict(info)) for info in await app.executors()]

    return router
