"""The routes over an App: sessions, turns, events, webhooks, schedules, health.

See SPEC section 8. Handlers are thin: they check the request with the
models of :mod:`turnkit.server.models`, call the App's public methods and
shape what comes back; errors become problems in :mod:`turnkit.server.problems`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import JSONResponse

from turnkit.errors import InvalidInputError, TurnNotFoundError
from turnkit.server.approvals import approval_route
from turnkit.server.chat import chat_route
from turnkit.server.events import events_route
from turnkit.server.models import (
    CancelOut,
    CreateSession,
    ForkSession,
    Health,
    PostTurn,
    QuestionOut,
    ReceiptOut,
    ScheduleOut,
    SessionOut,
    TurnOut,
    WebhookAccepted,
)
from turnkit.server.problems import only_query, responses
from turnkit.server.signed import LINEAR_BODY, SLACK_BODY, WEBHOOK_BODY, request_body

__all__ = ["guarded_routes", "open_routes"]

SessionId = Path(min_length=1, max_length=64, description="the session's id")


def _question(question: Any) -> QuestionOut | None:
    return None if question is None else QuestionOut.model_validate(question.to_dict())


def session_out(session: Any) -> SessionOut:
    return SessionOut.model_validate(dataclasses.asdict(session))


def turn_out(turn: Any) -> TurnOut:
    return TurnOut(
        id=turn.id,
        session_id=turn.session_id,
        seq=turn.seq,
        status=turn.status,
        input=turn.input.to_dict(),
        output=turn.output,
        question=_question(turn.question),
        error=turn.error,
        reason=turn.reason,
        started_at=turn.started_at,
        ended_at=turn.ended_at,
    )


def guarded_routes(app: Any, guard: Any, ping: float) -> APIRouter:
    """The routes that need the API key."""
    router = APIRouter(dependencies=[Depends(guard)], responses=responses(401))
    _session_routes(router, app)
    _turn_routes(router, app)
    events_route(router, app, ping)
    chat_route(router, app)
    _control_routes(router, app)
    approval_route(router, app)
    return router


def _session_routes(router: APIRouter, app: Any) -> None:
    @router.post(
        "/sessions",
        status_code=201,
        response_model=SessionOut,
        responses={200: {"model": SessionOut, "description": "the existing session of key"}}
        | responses(400, 413, 415, 422),
    )
    async def create_session(body: CreateSession, response: Response) -> SessionOut:
        """A new session of ``agent``; with ``key``, the existing one of that key (200)."""
        session, created = await app.open_session(body.agent, body.key, body.data)
        if not created:
            response.status_code = 200
        return session_out(session)

    @router.get("/sessions", responses=responses(422))
    async def list_sessions(
        agent: str | None = Query(None, description="only sessions of this agent"),
        status: str | None = Query(
            None, description="only sessions in this status: idle, running, awaiting_input, ended"
        ),
        limit: int = Query(50, description="at most this many (1 to 500)"),
        before: str | None = Query(
            None, description="only sessions older than this one (the last id of a page)"
        ),
        _known: None = Depends(only_query("agent", "status", "limit", "before")),
    ) -> list[SessionOut]:
        """Sessions, newest first; page with ``before`` = the last id of the previous page."""
        found = await app.list_sessions(agent, status, limit, before)
        return [session_out(session) for session in found]

    @router.post(
        "/sessions/{session_id}/fork",
        status_code=201,
        response_model=SessionOut,
        responses={200: {"model": SessionOut, "description": "the existing fork of key"}}
        | responses(400, 404, 413, 415, 422),
    )
    async def fork_session(
        body: ForkSession, response: Response, session_id: str = SessionId
    ) -> SessionOut:
        """A new session of the same agent with a copy of the first ``at`` messages
        (all when absent); with ``key``, the existing fork of that key (200)."""
        session, created = await app.open_fork(session_id, body.at, body.key)
        if not created:
            response.status_code = 200
        return session_out(session)

    @router.get("/sessions/{session_id}", responses=responses(404, 422))
    async def get_session(session_id: str = SessionId) -> SessionOut:
        """The session's state."""
        return session_out(await app.get_session(session_id))

    @router.get("/sessions/{session_id}/messages", responses=responses(404, 422))
    async def get_messages(session_id: str = SessionId) -> list[dict[str, Any]]:
        """The durable conversation, as wire dicts, oldest first."""
        return [message.to_dict() for message in await app.history(session_id)]


def _turn_routes(router: APIRouter, app: Any) -> None:
    @router.post(
        "/sessions/{session_id}/turns",
        status_code=202,
        responses=responses(400, 404, 409, 413, 415, 422),
    )
    async def post_turn(body: PostTurn, session_id: str = SessionId) -> ReceiptOut:
        """Give the session an input; it is durable when this answers."""
        try:
            receipt = await app.send(
                session_id,
                text=body.input.text,
                payload=body.input.payload,
                idempotency_key=body.idempotency_key,
                answers=body.answers,
                on_busy=body.on_busy,
            )
        except InvalidInputError:
            await app.get_session(session_id)  # an unknown session is a 404 whatever the input
            raise
        return _receipt(receipt)

    @router.get("/sessions/{session_id}/turns/{turn_id}", responses=responses(404, 422))
    async def get_turn(
        session_id: str = SessionId, turn_id: str = Path(min_length=1, max_length=64)
    ) -> TurnOut:
        """One turn of the session."""
        await app.get_session(session_id)
        turn = await app.get_turn(turn_id)
        if turn.session_id != session_id:
            raise TurnNotFoundError(turn_id)
        return turn_out(turn)


def _control_routes(router: APIRouter, app: Any) -> None:
    @router.post("/sessions/{session_id}/cancel", status_code=202, responses=responses(404, 422))
    async def cancel(session_id: str = SessionId) -> CancelOut:
        """Cancel the running turn (reason ``cancelled``); queued inputs still run."""
        await app.get_session(session_id)
        return CancelOut(turn_id=await app.cancel(session_id))

    @router.post("/sessions/{session_id}/end", responses=responses(404, 422))
    async def end(session_id: str = SessionId) -> SessionOut:
        """End the session: its turns are cancelled and it takes no more input."""
        return session_out(await app.end_session(session_id))

    @router.get("/schedules")
    async def schedules() -> list[ScheduleOut]:
        """Every schedule, with the next instant it fires."""
        return [ScheduleOut(**dataclasses.asdict(item)) for item in await app.schedules()]


def _receipt(receipt: Any) -> ReceiptOut:
    return ReceiptOut(
        input_id=receipt.input_id,
        turn_id=receipt.turn_id,
        status=receipt.status,
        duplicate=receipt.duplicate,
    )


def open_routes(app: Any) -> APIRouter:
    """The routes without the API key: signed webhooks, channels and health."""
    router = APIRouter()

    @router.post(
        "/webhooks/{webhook_id}",
        status_code=202,
        responses={200: {"model": WebhookAccepted, "description": "a replay: nothing stored"}}
        | responses(400, 401, 404, 409, 413, 415, 422),
        openapi_extra=request_body(WEBHOOK_BODY),
    )
    async def webhook(
        request: Request, response: Response, webhook_id: str = Path(min_length=1, max_length=100)
    ) -> WebhookAccepted:
        """A Standard Webhooks delivery; its JSON body becomes the payload of an input."""
        body = await request.body()
        delivery = await app.deliver_webhook(webhook_id, request.headers, body)
        receipt = delivery.receipt
        if receipt.duplicate:
            response.status_code = 200
        return WebhookAccepted(
            webhook_id=delivery.webhook_id,
            message_id=delivery.message_id,
            session_id=delivery.session_id,
            input_id=receipt.input_id,
            turn_id=receipt.turn_id,
            duplicate=receipt.duplicate,
        )

    channel_answers = {200: {"description": "stored, ignored, or a challenge answered"}}
    channel_answers |= responses(400, 401, 404, 413, 415)

    @router.post(
        "/channels/slack/events", responses=channel_answers, openapi_extra=request_body(SLACK_BODY)
    )
    async def slack_events(request: Request) -> Response:
        """Slack's Events API (signed): mentions and direct messages become inputs."""
        return await _channel(app, "slack", request)

    @router.post(
        "/channels/linear/webhook",
        responses=channel_answers,
        openapi_extra=request_body(LINEAR_BODY),
    )
    async def linear_webhook(request: Request) -> Response:
        """Linear's agent session webhooks (signed): created and prompted become inputs."""
        return await _channel(app, "linear", request)

    @router.get("/healthz")
    async def healthz() -> Health:
        """Whether the server answers, and which executor (process) serves it."""
        return Health(status="ok", executor_id=app.executor_id, runs_turns=app.runs_turns)

    return router


async def _channel(app: Any, provider: str, request: Request) -> Response:
    """A channel request, answered by the App's framework-agnostic handler."""
    answer = await app.handle_channel(provider, request.headers, await request.body())
    headers = answer.headers or None
    return JSONResponse(answer.body, answer.status, headers, media_type=answer.media_type)
