"""The shared reader behind event streams: each subscriber gets every event once, in order."""

from __future__ import annotations

import asyncio

import pytest

from turnkit.server import feeds as feeds_module
from turnkit.server.feeds import Feeds

from .conftest import echo_app


async def test_a_slow_subscriber_dropped_by_the_feed_still_gets_every_event(
    db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feeds_module, "QUEUE_LIMIT", 2)
    app = echo_app(db_url)
    async with app:
        sid = (await app.create_session("echo")).id
        feeds = Feeds(app)
        fast_seen: list[int] = []
        slow_started = asyncio.Event()
        release = asyncio.Event()

        async def fast() -> None:
            async for event in feeds.follow(sid, 0):
                fast_seen.append(event.seq)

        async def slow() -> list[int]:
            seen = []
            async for event in feeds.follow(sid, 0):
                seen.append(event.seq)
                slow_started.set()
                await release.wait()  # stalls after its first event: the feed drops it
            return seen

        fast_task = asyncio.create_task(fast())
        slow_task = asyncio.create_task(slow())
        for n in range(4):
            receipt = await app.send(sid, text=f"m{n}")
            if n == 0:
                await asyncio.wait_for(slow_started.wait(), 10)
            await app.wait(receipt.turn_id, timeout=10)
        await app.end_session(sid)
        await asyncio.wait_for(fast_task, 20)
        release.set()
        slow_seen = await asyncio.wait_for(slow_task, 20)
        everything = [event.seq for event in await app.events(sid)]
        assert fast_seen == slow_seen == everything == list(range(1, len(everything) + 1))


async def test_late_subscribers_start_from_their_own_cursor(db_url: str) -> None:
    app = echo_app(db_url)
    async with app:
        sid = (await app.create_session("echo")).id
        receipt = await app.send(sid, text="first")
        await app.wait(receipt.turn_id, timeout=10)
        feeds = Feeds(app)
        early = asyncio.create_task(_collect(feeds, sid, 0))
        late = asyncio.create_task(_collect(feeds, sid, 3))
        receipt = await app.send(sid, text="second")
        await app.wait(receipt.turn_id, timeout=10)
        await app.end_session(sid)
        everything = [event.seq for event in await app.events(sid)]
        assert await asyncio.wait_for(early, 20) == everything
        assert await asyncio.wait_for(late, 20) == everything[3:]


async def _collect(feeds: Feeds, sid: str, after: int) -> list[int]:
    return [event.seq async for event in feeds.follow(sid, after)]
