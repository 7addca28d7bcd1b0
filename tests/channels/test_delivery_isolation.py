"""One conversation's trouble (a rate limit, a backlog) never holds up another's replies."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fakes.linear import FakeLinear
from fakes.slack import FakeSlack
from turnkit.channels import outbox
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

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

THREAD_A = "1700000000.000100"
THREAD_B = "1700000001.000100"


def slack_app(db_url: str, fake: FakeSlack, **options: Any) -> App:
    app = App(db_url, fire_schedules=False, **options)
    replies = [lambda request: f"reply to {request.last_text}"] * 10

    @app.agent("helper", model=ScriptedModel(replies))
    def helper() -> str:
        return "Help."

    app.slack("helper", SLACK_SECRET, fake.api_key, api_url=fake.api_url)
    return app


async def ask_in_thread(app: App, ts: str, text: str) -> str:
    headers, body = slack_request(slack_event(mention(f"<@{BOT}> {text}", ts)))
    answer = await app.handle_channel("slack", headers, body)
    assert answer.status == 200, answer.body
    return answer.body["session_id"]


async def test_a_rate_limited_thread_does_not_hold_up_replies_in_other_threads(
    db_url: str,
) -> None:
    retry_after = 3
    with FakeSlack() as fake:
        fake.rate_limit(retry_after=retry_after, times=1, thread_ts=THREAD_A)
        app = slack_app(db_url, fake)
        async with app:
            await ask_in_thread(app, THREAD_A, "a")
            await asyncio.to_thread(fake.wait_for_requests, 1)  # thread A is told to wait
            limited_at = time.monotonic()
            await ask_in_thread(app, THREAD_B, "b")
            (first,) = await asyncio.to_thread(fake.wait_for_posts, 1)
            first_after = time.monotonic() - limited_at
            posts = await asyncio.to_thread(fake.wait_for_posts, 2)
            second_after = time.monotonic() - limited_at
    assert (first.thread_ts, first.text) == (THREAD_B, "reply to b")
    assert first_after < retry_after  # B did not wait out A's back-off
    assert (posts[1].thread_ts, posts[1].text) == (THREAD_A, "reply to a")
    assert second_after >= retry_after - 0.1  # A's Retry-After was honoured
    assert len(fake.requests) == 3


async def test_a_backlog_in_one_thread_does_not_hide_another_threads_reply(db_url: str) -> None:
    with FakeSlack() as fake:
        fake.rate_limit(retry_after=30, times=1, thread_ts=THREAD_A)  # A's head waits 30 s
        app = slack_app(db_url, fake)
        async with app:
            session_a = await ask_in_thread(app, THREAD_A, "a")
            await asyncio.to_thread(fake.wait_for_requests, 1)
            store = app.runtime.store
            for n in range(205):  # more rows behind A's head than one look used to read
                content = {"text": f"backlog {n}"}
                await asyncio.to_thread(
                    outbox.queue_notice, store, session_a, "slack", content, f"backlog:{n}"
                )
            await ask_in_thread(app, THREAD_B, "b")
            posts = await asyncio.to_thread(fake.wait_for_posts, 1)
    assert [(p.thread_ts, p.text) for p in posts] == [(THREAD_B, "reply to b")]


async def test_a_rate_limited_linear_session_does_not_hold_up_other_sessions(
    db_url: str,
) -> None:
    retry_after = 3
    with FakeLinear(sessions=("as-1", "as-2")) as fake:
        fake.fail_with_status(429, retry_after=str(retry_after), session="as-1")
        app = App(db_url, fire_schedules=False)

        @app.agent("triage", model=ScriptedModel(["done"] * 2))
        def triage() -> str:
            return "Triage the issue."

        app.linear("triage", LINEAR_SECRET, fake.api_key, api_url=fake.api_url)
        async with app:
            started = time.monotonic()
            for session in ("as-1", "as-2"):
                headers, body = linear_request(linear_created(session))
                assert (await app.handle_channel("linear", headers, body)).status == 200
            first = await asyncio.to_thread(fake.wait_for_activities, 2)
            first_after = time.monotonic() - started
            every = await asyncio.to_thread(fake.wait_for_activities, 4)
    assert [a.agent_session_id for a in first] == ["as-2", "as-2"]
    assert first_after < retry_after  # as-2 did not wait out as-1's back-off
    assert [(a.agent_session_id, a.content["type"]) for a in every[2:]] == [
        ("as-1", "thought"),
        ("as-1", "response"),
    ]
