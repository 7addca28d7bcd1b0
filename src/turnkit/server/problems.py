"""Errors as ``application/problem+json`` (RFC 9457), with the status that fits.

Every refusal names what was wrong. turnkit's own errors map to statuses
here, once: unknown ids 404, an ended session 409, a bad input 422 (400 when
the body is not JSON at all), a bad webhook signature 401.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from turnkit._http import PROBLEM_TYPE, problem_body
from turnkit.errors import (
    InvalidInputError,
    NoApprovalOpenError,
    SessionEndedError,
    SessionNotFoundError,
    TurnNotFoundError,
    UnknownAgentError,
    WebhookNotFoundError,
    WebhookSignatureError,
)
from turnkit.server.models import Problem

__all__ = ["PROBLEM_TYPE", "install_handlers", "problem", "problem_bytes", "responses"]


def problem(
    status: int, detail: str, errors: list[dict[str, Any]] | None = None, **headers: str
) -> JSONResponse:
    """A problem+json response."""
    body = Problem(**problem_body(status, detail), errors=errors)
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=status,
        media_type=PROBLEM_TYPE,
        headers=headers or None,
    )


def problem_bytes(status: int, detail: str) -> bytes:
    """The body of a problem, for code below FastAPI (the body-limit middleware)."""
    return json.dumps(problem_body(status, detail)).encode()


def only_query(*names: str) -> Any:
    """A dependency refusing query parameters other than ``names`` (a filter misspelt
    would otherwise be ignored and return everything): ``InvalidInputError``, a 422."""
    allowed = frozenset(names)

    def check(request: Request) -> None:
        unknown = sorted(set(request.query_params) - allowed)
        if unknown:
            raise InvalidInputError(
                "query",
                f"unknown parameter(s) {', '.join(map(repr, unknown))}; "
                f"this route takes {', '.join(sorted(allowed))}",
            )

    return check


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries documenting these error statuses as problems."""
    schema = {"$ref": "#/components/schemas/Problem"}
    return {
        status: {
            "description": HTTPStatus(status).phrase,
            "content": {PROBLEM_TYPE: {"schema": schema}},
        }
        for status in statuses
    }


def _validation(request: Request, err: Exception) -> JSONResponse:
    assert isinstance(err, RequestValidationError)
    errors = [
        {
            "loc": [str(part) for part in e.get("loc", ())],
            "msg": e.get("msg", ""),
            "type": e["type"],
        }
        for e in err.errors()
    ]
    if any(e["type"] == "json_invalid" for e in errors):
        return problem(400, "the request body is not valid JSON", errors)
    where = "; ".join(f"{'.'.join(e['loc'])}: {e['msg']}" for e in errors[:5])
    return problem(422, where or "the request is not valid", errors)


def _http(request: Request, err: Exception) -> JSONResponse:
    assert isinstance(err, HTTPException)
    headers = dict(err.headers or {})
    return problem(err.status_code, str(err.detail), **headers)


def _turnkit(status: int) -> Any:
    def handle(request: Request, err: Exception) -> JSONResponse:
        if isinstance(err, WebhookSignatureError):
            return problem(401, str(err))
        if isinstance(err, InvalidInputError) and err.field == "body":
            return problem(400, str(err))
        return problem(status, str(err))

    return handle


def install_handlers(api: FastAPI) -> None:
    """Route every error FastAPI and turnkit raise to a problem response."""
    api.add_exception_handler(RequestValidationError, _validation)
    api.add_exception_handler(HTTPException, _http)
    for kind, status in [
        (SessionNotFoundError, 404),
        (TurnNotFoundError, 404),
        (WebhookNotFoundError, 404),
        (UnknownAgentError, 422),
        (SessionEndedError, 409),
        (NoApprovalOpenError, 409),
        (InvalidInputError, 422),
        (WebhookSignatureError, 401),
    ]:
        api.add_exception_handler(kind, _turnkit(status))
