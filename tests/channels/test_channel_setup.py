"""app.slack / app.linear refuse bad settings with errors naming the argument."""

from __future__ import annotations

import pytest

from turnkit.errors import UnknownAgentError
from turnkit.sessions import App
from turnkit.testing import ScriptedModel


def bare_app(db_url: str) -> App:
    app = App(db_url)

    @app.agent("helper", model=ScriptedModel([]))
    def helper() -> str:
        return "Help."

    return app


def test_bad_channel_settings_are_refused_naming_the_argument(db_url: str) -> None:
    app = bare_app(db_url)
    with pytest.raises(UnknownAgentError):
        app.slack("nobody", "secret", "xoxb-1")
    with pytest.raises(ValueError, match=r"app\.slack: signing_secret must be a non-empty string"):
        app.slack("helper", "  ", "xoxb-1")
    with pytest.raises(ValueError, match=r"app\.linear: access_token must be a non-empty string"):
        app.linear("helper", "secret", None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"app\.linear: api_url must be an http:// or https://"):
        app.linear("helper", "secret", "token", api_url="ftp://example.org")
    assert app.channels == {}
    slack = app.slack("helper", "secret", "xoxb-1")
    assert slack.api_url == "https://slack.com/api/"
    assert app.linear("helper", "s", "t").api_url == "https://api.linear.app/graphql"
    with pytest.raises(ValueError, match=r"app\.slack: the channel is already configured"):
        app.slack("helper", "secret", "xoxb-2")
    assert app.channels["slack"] is slack


async def test_channels_are_configured_before_the_app_starts(db_url: str) -> None:
    app = bare_app(db_url)
    async with app:
        with pytest.raises(RuntimeError, match="configure channels before the App starts"):
            app.slack("helper", "secret", "xoxb-1")
        answer = await app.handle_channel("linear", {}, b"{}")
    assert answer.status == 404 and answer.media_type == "application/problem+json"
    with pytest.raises(RuntimeError, match="not started"):
        await app.handle_channel("slack", {}, b"{}")
