"""Channels over HTTP: signed Slack and Linear requests to a real server, replies to fakes."""

from __future__ import annotations

from typing import Any

import httpx2

import turnkit
from channels._support import (
    BOT,
    LINEAR_SECRET,
    SLACK_SECRET,
    ask_message,
    count_rows,
    linear_created,
    linear_prompted,
    linear_request,
    linear_signed,
    mention,
    slack_event,
    slack_request,
    slack_signed,
)
from fakes.linear import FakeLinear
from fakes.slack import FakeSlack
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

from .conftest import API_KEY, serving

ASK = ask_message("Which region?", "EU", "US")


def channel_app(db_url: str, replies: list[Any], slack: FakeSlack, linear: FakeLinear) -> App:
    app = App(db_url, fire_schedules=False)

    @app.agent("helper", model=ScriptedModel(replies))
    def helper() -> str:
        turnkit.use_tool("ask")
        return "Help."

    app.slack("helper", SLACK_SECRET, slack.api_key, api_url=slack.api_url)
    app.linear("helper", LINEAR_SECRET, linear.api_key, api_url=linear.api_url)
    return app


def post(base: str, path: str, request: tuple[dict[str, str], bytes]) -> httpx2.Response:
    headers, body = request
    return httpx2.post(base + path, content=body, headers=headers, timeout=10)


def test_a_slack_mention_in_a_thread_gets_a_threaded_reply_over_http(db_url: str) -> None:
    with FakeSlack() as slack, FakeLinear() as linear:
        app = channel_app(db_url, ["Threaded hello."], slack, linear)
        with serving(app) as base:
            challenge = {"type": "url_verification", "challenge": "c-1", "token": "t"}
            verified = post(base, "/channels/slack/events", slack_request(challenge))
            envelope = slack_event(mention(f"<@{BOT}> hi", "1700000100.000200", "1700000000.0001"))
            first = post(base, "/channels/slack/events", slack_request(envelope))
            retry_headers = {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
            retry = post(base, "/channels/slack/events", slack_request(envelope, **retry_headers))
            forged = post(base, "/channels/slack/events", slack_request(envelope, secret="x"))
            posts = slack.wait_for_posts(1)
        assert verified.status_code == 200 and verified.json() == {"challenge": "c-1"}
        assert first.status_code == 200 and first.json()["duplicate"] is False
        assert retry.status_code == 200 and retry.json()["duplicate"] is True
        assert forged.status_code == 401
        assert forged.headers["content-type"].startswith("application/problem+json")
        assert [(p.channel, p.thread_ts, p.text) for p in posts] == [
            ("C1", "1700000000.0001", "Threaded hello.")
        ]
        assert count_rows(db_url, "turnkit_inputs") == 1


def test_a_linear_ask_is_an_elicitation_and_the_prompt_resumes_with_the_answer(
    db_url: str,
) -> None:
    with FakeSlack() as slack, FakeLinear(sessions=("as-1",)) as linear:
        app = channel_app(db_url, [ASK, "Checking EU."], slack, linear)
        auth = {"Authorization": f"Bearer {API_KEY}"}
        with serving(app) as base:
            created = post(base, "/channels/linear/webhook", linear_request(linear_created()))
            replay = post(base, "/channels/linear/webhook", linear_request(linear_created()))
            asked = linear.wait_for_activities(2)
            prompt = linear_request(linear_prompted("EU", "act-1"))
            answered = post(base, "/channels/linear/webhook", prompt)
            again = post(base, "/channels/linear/webhook", prompt)
            done = linear.wait_for_activities(3)
            session_id = created.json()["session_id"]
            events = httpx2.get(f"{base}/sessions/{session_id}/events", headers=auth).json()
            last_turn = events[-1]["turn_id"]
            turn = httpx2.get(f"{base}/sessions/{session_id}/turns/{last_turn}", headers=auth)
            stale = post(
                base, "/channels/linear/webhook", linear_request(linear_created(), skew_s=-90)
            )
        assert created.status_code == 200 and replay.json()["duplicate"] is True
        assert [a.content["type"] for a in asked] == ["thought", "elicitation"]
        assert asked[1].content["body"] == "Which region?\n- EU\n- US"
        assert answered.json()["duplicate"] is False and again.json()["duplicate"] is True
        assert done[2].content == {"type": "response", "body": "Checking EU."}
        answer = turn.json()["input"]["answer"]
        assert answer["text"] == "EU" and answer["value"] == "eu"
        assert stale.status_code == 401
        assert count_rows(db_url, "turnkit_inputs") == 2


def test_channel_routes_need_no_api_key_but_a_missing_channel_is_404(db_url: str) -> None:
    app = App(db_url, fire_schedules=False)

    @app.agent("helper", model=ScriptedModel([]))
    def helper() -> str:
        return "Help."

    with serving(app) as base:
        answer = post(base, "/channels/slack/events", slack_request({"type": "url_verification"}))
    assert answer.status_code == 404
    assert answer.json()["detail"] == "no 'slack' channel is configured on this App"


def test_signed_bodies_that_cannot_be_read_are_refused_as_each_provider_retries(
    db_url: str,
) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    with FakeSlack() as slack, FakeLinear() as linear:
        app = channel_app(db_url, [], slack, linear)
        with serving(app) as base:
            slack_answer = post(base, "/channels/slack/events", slack_signed(deep))
            linear_answer = post(base, "/channels/linear/webhook", linear_signed(deep))
    # Slack: a 400 problem, and no retries (Slack honours X-Slack-No-Retry)
    assert slack_answer.status_code == 400
    assert slack_answer.headers["content-type"] == "application/problem+json"
    assert slack_answer.headers["x-slack-no-retry"] == "1"
    assert "nested too deeply" in slack_answer.json()["detail"]
    # Linear retries anything but a 200: dropped with a 200 that says why
    assert linear_answer.status_code == 200
    assert linear_answer.json() == {
        "ok": False,
        "dropped": "body: is nested too deeply to be read as JSON",
    }
    assert count_rows(db_url, "turnkit_inputs") == 0
