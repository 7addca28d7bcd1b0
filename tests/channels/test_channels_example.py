"""examples/channels_app.py: configured from the environment, it answers in Slack and Linear."""

from __future__ import annotations

import asyncio
import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from fakes import FakeOpenAIChat, Reply
from fakes.linear import FakeLinear
from fakes.slack import FakeSlack

from ._support import (
    BOT,
    LINEAR_SECRET,
    SLACK_SECRET,
    linear_created,
    linear_request,
    mention,
    slack_event,
    slack_request,
)

EXAMPLE = Path(__file__).parents[2] / "examples" / "channels_app.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("channels_app_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_without_secrets_no_channel_is_on() -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(EXAMPLE.parents[1] / "src")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "channels: none" in done.stdout


async def test_the_example_answers_a_slack_mention_and_a_linear_session(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with (
        FakeSlack() as slack,
        FakeLinear(sessions=("as-1",)) as linear,
        FakeOpenAIChat(Reply("Deploys go out Tuesdays."), Reply("On it.")) as model,
    ):
        monkeypatch.setenv("TURNKIT_DATABASE_URL", f"sqlite:///{tmp_path / 'example.db'}")
        monkeypatch.setenv("CHANNELS_MODEL", "openai:gpt-4o-mini")
        monkeypatch.setenv("OPENAI_BASE_URL", model.base_url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("SLACK_SIGNING_SECRET", SLACK_SECRET)
        monkeypatch.setenv("SLACK_BOT_TOKEN", slack.api_key)
        monkeypatch.setenv("SLACK_API_URL", slack.api_url)
        monkeypatch.setenv("LINEAR_WEBHOOK_SECRET", LINEAR_SECRET)
        monkeypatch.setenv("LINEAR_ACCESS_TOKEN", linear.api_key)
        monkeypatch.setenv("LINEAR_API_URL", linear.api_url)
        app = load_example().app
        assert sorted(app.channels) == ["linear", "slack"]
        async with app:
            headers, body = slack_request(slack_event(mention(f"<@{BOT}> when?", "1.000100")))
            assert (await app.handle_channel("slack", headers, body)).status == 200
            posts = await asyncio.to_thread(slack.wait_for_posts, 1)
            headers, body = linear_request(linear_created())
            assert (await app.handle_channel("linear", headers, body)).status == 200
            activities = await asyncio.to_thread(linear.wait_for_activities, 2)
        assert (posts[0].thread_ts, posts[0].text) == ("1.000100", "Deploys go out Tuesdays.")
        assert [a.content for a in activities] == [
            {"type": "thought", "body": "Looking into it."},
            {"type": "response", "body": "On it."},
        ]
        systems = [r.body["messages"][0]["content"] for r in model.requests]
        assert "You help the team in slack." in systems[0]
        assert "working on ENG-7: Checkout fails for EU cards" in systems[1]
