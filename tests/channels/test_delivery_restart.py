"""A process killed mid-post: started again under its executor id, it resumes at once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from channels.delivery_child import REPLY, THREAD, build
from fakes.slack import FakeSlack
from turnkit.channels import outbox
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

CHILD = Path(__file__).with_name("delivery_child.py")


def start_child(db_url: str, fake: FakeSlack, executor_id: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, str(CHILD), db_url, fake.api_url, fake.api_key, executor_id]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )


def kill_mid_post(db_url: str, fake: FakeSlack, executor_id: str) -> None:
    """The child posts its reply; the fake holds the post; the child is killed (SIGKILL)."""
    fake.hold()
    child = start_child(db_url, fake, executor_id)
    try:
        fake.wait_for_requests(1, timeout=25)  # the post is in flight, its row leased
    finally:
        child.kill()
        child.wait(timeout=10)
    fake.release(drop=True)  # the dead child's post never reached Slack


def outbox_rows(db_url: str) -> list[tuple[str, int]]:
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            query = "SELECT status, done FROM turnkit_channel_outbox ORDER BY id"
            return [tuple(row) for row in conn.execute(sa.text(query))]
    finally:
        engine.dispose()


async def test_a_restart_under_the_same_executor_id_resumes_its_delivery_at_once(
    db_url: str,
) -> None:
    with FakeSlack() as fake:
        await asyncio.to_thread(kill_mid_post, db_url, fake, "deliverer-1")
        again = build(db_url, fake.api_url, fake.api_key, "deliverer-1", [])
        async with again:
            # far sooner than the dead run's lease (LEASE_S, 120 s) would lapse
            posts = await asyncio.to_thread(fake.wait_for_posts, 1, 10)
        assert [(p.thread_ts, p.text) for p in posts] == [(THREAD, REPLY)]
        assert len(fake.posts) == 1
    assert outbox_rows(db_url) == [("sent", 1)]


async def test_another_executors_lease_is_left_to_lapse_and_recorded_posts_stay_made(
    db_url: str,
) -> None:
    app = App(db_url, fire_schedules=False)  # no channel: no delivery task of its own

    @app.agent("helper", model=ScriptedModel([]))
    def helper() -> str:
        return "Help."

    await app.start()
    try:
        store = app.runtime.store
        session, _ = app.runtime.open_session("helper", "k", {})
        outbox.link_session(store, session.id, "slack", {"channel": "C1", "thread_ts": "1.0"})
        outbox.queue_notice(store, session.id, "slack", {"text": "hello"}, "notice:1")
        (item,), _ = outbox.claim_due(store, "executor-a", 120.0, ("slack",))
        outbox.release(store, "executor-b")  # b starts: a's lease is not b's to take
        assert outbox.claim_due(store, "executor-b", 120.0, ("slack",))[0] == []
        outbox.release(store, "executor-a")  # a starts again: its lease is back at once
        (again,), _ = outbox.claim_due(store, "executor-b", 120.0, ("slack",))
        assert again.id == item.id
        # a's late answer does not count: b holds the row now
        assert not outbox.record_progress(store, item, 1, True, 120.0)
        assert outbox.record_progress(store, again, 1, True, 120.0)
    finally:
        await app.stop()
    assert outbox_rows(db_url) == [("sent", 1)]
