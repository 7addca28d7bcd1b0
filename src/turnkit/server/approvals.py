"""``POST /sessions/{id}/approvals``: decide the tool calls that wait for a person.

A thin route over :meth:`turnkit.sessions.App.approve` (SPEC section 8):
202 with the receipt of the input that decides, 409 when no call waits,
422 naming the call for an unknown or missing call id or an edited input
its tool refuses (nothing stored), 404 for an unknown session.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path

from turnkit.server.models import ApprovalIn, PostApprovals, ReceiptOut
from turnkit.server.problems import responses

__all__ = ["approval_route"]


def approval_route(router: APIRouter, app: Any) -> None:
    @router.post(
        "/sessions/{session_id}/approvals",
        status_code=202,
        responses=responses(400, 404, 409, 413, 415, 422),
    )
    async def approve(
        body: PostApprovals,
        session_id: str = Path(min_length=1, max_length=64, description="the session's id"),
    ) -> ReceiptOut:
        """Approve or deny the tool calls the session's open question lists."""
        decisions: Any = body.decisions
        if isinstance(decisions, dict):
            decisions = {call_id: _decision(value) for call_id, value in decisions.items()}
        receipt = await app.approve(session_id, decisions, body.reason)
        return ReceiptOut(
            input_id=receipt.input_id,
            turn_id=receipt.turn_id,
            status=receipt.status,
            duplicate=receipt.duplicate,
        )


def _decision(value: bool | ApprovalIn) -> Any:
    if isinstance(value, bool):
        return value
    return value.model_dump(exclude_none=True)
