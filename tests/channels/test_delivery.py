"""Channel replies are durable: queued with the turn's end, posted once, across restarts."""

from __future__ import annotations

import asyncio
import socket

from fakes.slack import FakeSlack
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

from ._support import BOT, SLACK_SECRET, count_rows, mention, slack_event, slack_request


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/api/"  # nothing listens there any more


def make_app(db_url: str, token: str, api_url: str, replies: list[str]) -> App:
    app = App(db_url)

    @app.agent("helper", model=ScriptedModel(replies))
    def helper() -> str:
        return "Help."

    app.slack("helper", SLACK_SECRET, token, api_url=api_url)
    return app


async def test_a_reply_that_could_not_be_posted_before_a_restart_is_posted_after_it(
    db_url: str,
) -> None:
    app = make_app(db_url, "xoxb-test", closed_port_url(), ["Still here."])
    async with app:
        headers, body = slack_request(slack_event(mention(f"<@{BOT}> hi", "1.000100")))
        answer = await app.handle_channel("slack", headers, body)
        async with asyncio.timeout(15):
            async for event in app.follow(answer.body["session_id"]):
                if event.type == "turn.completed":
                    break
    assert count_rows(db_url, "turnkit_channel_outbox") == 1
    with FakeSlack() as fake:
        again = make_app(db_url, fake.api_key, fake.api_url, [])
        async with again:
            posts = await asyncio.to_thread(fake.wait_for_posts, 1)
    assert [(p.thread_ts, p.text) for p in posts] == [("1.000100", "Still here.")]


async def test_pieces_already_posted_are_not_posted_again_when_a_later_one_is_retried(
    db_url: str,
) -> None:
    reply = ("a" * 3000) + "\n\n" + ("b" * 3000)
    with FakeSlack() as fake:
        fake.refuse("service_unavailable", after_posts=1)
        app = make_app(db_url, fake.api_key, fake.api_url, [reply])
        async with app:
            headers, body = slack_request(slack_event(mention(f"<@{BOT}> long", "1.000100")))
            await app.handle_channel("slack", headers, body)
            posts = await asyncio.to_thread(fake.wait_for_posts, 2)
        assert [p.text[0] for p in posts] == ["a", "b"]
        assert len(fake.requests) == 3  # a, the refused b, b again
        assert len(fake.posts) == 2
