"""An App whose one agent, ``echo``, answers ``echo:<the input's text>``."""

from __future__ import annotations

from turnkit.sessions import App
from turnkit.testing import ScriptedModel


def echo_app(url: str, **options: object) -> App:
    app = App(url, **options)

    @app.agent("echo", model=ScriptedModel([lambda r: f"echo:{r.last_text}"] * 1000))
    def echo() -> str:
        return "Echo."

    return app
