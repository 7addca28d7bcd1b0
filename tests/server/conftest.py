"""A real server on 127.0.0.1: uvicorn in a thread, driven over HTTP with httpx2."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from sessions.conftest import any_db_url, postgres_admin_url, postgres_url
from turnkit.server import create_app
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

__all__ = ["any_db_url", "postgres_admin_url", "postgres_url"]  # Postgres, as sessions tests get it

API_KEY = "test-key-0123456789"


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.ready.set()


@contextmanager
def serving(app: App, api_key: str | None = API_KEY, **options: Any) -> Iterator[str]:
    """Serve ``app`` (started and stopped by the server); its base URL."""
    with serving_api(create_app(app, api_key, **options)) as base:
        yield base


@contextmanager
def serving_api(api: Any, **config: Any) -> Iterator[str]:
    """Serve the ASGI application ``api`` (``config``: more of uvicorn's settings)."""
    server = _Server(
        uvicorn.Config(
            api,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=2,
            **config,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        if not server.ready.wait(60) or not server.started:
            raise RuntimeError("the server did not start")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def echo_app(db_url: str) -> App:
    app = App(db_url, fire_schedules=False)

    @app.agent("echo", model=ScriptedModel([lambda r: f"echo:{r.last_text}"] * 2000))
    def echo() -> str:
        return "Repeat what you are told."

    return app


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'server.db'}"


@pytest.fixture
def auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {API_KEY}"}
