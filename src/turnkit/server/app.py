"""``create_app(app)``: the FastAPI application over an App (SPEC section 8).

The server starts the App when it starts and stops it when it stops (turns
in flight resume at the next start). A bearer key, when given, guards every
route but the signed webhooks, ``/healthz``, ``/openapi.json`` and the ``/ui``
page (which holds no data; :mod:`turnkit.server.ui`); it is
compared in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException

from turnkit.server.direct import TurnkitAPI
from turnkit.server.events import PING_SECONDS
from turnkit.server.executors import executor_routes
from turnkit.server.limits import BodyLimits
from turnkit.server.problems import install_handlers
from turnkit.server.routes import guarded_routes, open_routes
from turnkit.server.ui import ui_routes

__all__ = ["check_bind", "create_app", "is_loopback", "resolve_api_key"]

_bearer = HTTPBearer(auto_error=False, description="the server's API key")
_CREDENTIALS = Security(_bearer)


def resolve_api_key(api_key: str | None) -> str | None:
    """The key in force: the argument, else ``$TURNKIT_API_KEY``; None when neither is set."""
    key = api_key if api_key is not None else os.environ.get("TURNKIT_API_KEY")
    return key or None


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse to listen beyond loopback without an API key (``ValueError`` saying why)."""
    if api_key is None and not is_loopback(host):
        raise ValueError(
            f"refusing to listen on {host} without an API key: anyone who can reach it could "
            "drive your agents. Pass --api-key or set TURNKIT_API_KEY, or listen on 127.0.0.1"
        )


def _guard(api_key: str | None) -> Any:
    """The dependency that checks the bearer key (documented as a security scheme)."""
    expected = None if api_key is None else api_key.encode()

    async def guard(credentials: HTTPAuthorizationCredentials | None = _CREDENTIALS) -> None:
        if expected is None:
            return
        token = b"" if credentials is None else credentials.credentials.encode()
        if not hmac.compare_digest(token, expected):
            raise HTTPException(
                401,
                "a valid API key is required: send Authorization: Bearer <key>",
                headers={"WWW-Authenticate": "Bearer"},
            )

    return guard


def create_app(
    app: Any,
    api_key: str | None = None,
    *,
    manage_app: bool = True,
    sse_ping: float = PING_SECONDS,
) -> FastAPI:
    """The HTTP API of ``app`` (a :class:`turnkit.App`).

    ``api_key``: the bearer key clients must send (None: no key; ``turnkit
    serve`` then listens on loopback only). ``manage_app``: start the App
    with the server and stop it after (False when the caller runs it).
    ``sse_ping``: seconds between keep-alive comments on idle event streams.
    """

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if not manage_app:
            yield
            return
        async with app:
            yield

    api = TurnkitAPI(
        title="turnkit",
        summary="Durable agent sessions over HTTP",
        version="1",
        lifespan=lifespan,
    )
    install_handlers(api)
    api.include_router(guarded_routes(app, _guard(api_key), sse_ping))
    api.include_router(executor_routes(app, _guard(api_key)))
    api.include_router(open_routes(app))
    api.include_router(ui_routes())
    api.add_middleware(BodyLimits)
    _document(api, app)
    return api


def _document(api: FastAPI, app: Any) -> None:
    """Complete ``/openapi.json``: the Problem schema errors refer to, the App's agent names."""
    from turnkit.server.models import Problem

    build = api.openapi

    def openapi() -> dict[str, Any]:
        if api.openapi_schema is None:
            schemas = build().setdefault("components", {}).setdefault("schemas", {})
            schemas["Problem"] = Problem.model_json_schema(
                ref_template="#/components/schemas/{model}"
            )
            agent = schemas["CreateSession"]["properties"]["agent"]
            agent["enum"] = list(app.agents)
            agent["description"] = "the name of one of the App's agents"
        return api.openapi_schema  # type: ignore[return-value]

    api.openapi = openapi  # type: ignore[method-assign]
