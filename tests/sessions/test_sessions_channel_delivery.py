"""Channel replies with two processes delivering on one database: each reply posted once."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa

from channels._support import BOT, SLACK_SECRET, mention, slack_event, slack_request
from fakes.slack import FakeSlack
from turnkit.sessions import App
from turnkit.testing import ScriptedModel


def slack_app(db_url: str, fake: FakeSlack, workers: bool, executor_id: str) -> App:
    app = App(db_url, workers=workers, executor_id=executor_id, fire_schedules=False)
    replies = [lambda request: f"reply to {request.last_text}"] * 10

    @app.agent("helper", model=ScriptedModel(replies))
    def helper() -> str:
        return "Help."

    app.slack("helper", SLACK_SECRET, fake.api_key, api_url=fake.api_url)
    return app


async def test_two_delivering_processes_post_each_reply_once(any_db_url: str) -> None:
    with FakeSlack() as fake:
        runner = slack_app(any_db_url, fake, True, "runner")
        server = slack_app(any_db_url, fake, False, "server")  # receives, runs no turns
        async with runner, server:
            for n in range(4):
                event = mention(f"<@{BOT}> question {n}", f"170000000{n}.000100")
                headers, body = slack_request(slack_event(event))
                assert (await server.handle_channel("slack", headers, body)).status == 200
            posts = await asyncio.to_thread(fake.wait_for_posts, 4)
        engine = sa.create_engine(any_db_url.replace("postgresql://", "postgresql+psycopg://"))
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT status, done FROM turnkit_channel_outbox")).all()
        engine.dispose()
    assert sorted(p.text for p in posts) == [f"reply to question {n}" for n in range(4)]
    assert len(fake.posts) == 4
    assert [tuple(row) for row in rows] == [("sent", 1)] * 4
