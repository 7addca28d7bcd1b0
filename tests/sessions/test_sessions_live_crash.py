"""kill -9 mid-stream: the turn completes after restart, each reply recorded once."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from sessions.live_crash_app import CALL, FIRST_TRY, build
from sessions.test_sessions_crash import Child
from turnkit.sessions import Event, LiveEvent
from turnkit.testing import StreamingScriptedModel

CHILD_APP = Path(__file__).with_name("live_crash_app.py")
SECOND_TRY = "Second try, after the restart."
TIMEOUT = 25


class LiveChild(Child):
    def __init__(self, db: Path, mode: str) -> None:
        import os
        import subprocess
        import sys

        env = {**os.environ, "PYTHONPATH": os.pathsep.join([*sys.path])}
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD_APP), str(db), mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        import queue

        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()


async def restarted(db: Path, model: Any, turn_id: str, hold: threading.Event) -> list[Any]:
    """Restart the app on ``db``; follow the turn live from the start until it ends."""
    app = build(str(db), model, block=False)
    items: list[Any] = []
    async with app:
        turn = await app.get_turn(turn_id)
        follower = app.follow(turn.session_id, after=0, live=True)

        async def read() -> None:
            async for item in follower:
                items.append(item)
                hold.set()  # subscribed (it gave its first item): the model may go on
                if isinstance(item, Event) and item.type in ("turn.completed", "turn.failed"):
                    return

        await asyncio.wait_for(read(), TIMEOUT)
        await follower.aclose()
        assert (await app.wait(turn_id, timeout=TIMEOUT)).status == "completed"
        items.append(await app.events(turn.session_id))
    return items


async def first_delta(db: Path, turn_id: str) -> LiveEvent:
    """The first delta of the turn, as a follower that runs no turns sees it."""
    app = build(str(db), StreamingScriptedModel(), block=False, workers=False, executor_id="x")
    async with app:
        turn = await app.get_turn(turn_id)

        async def read() -> LiveEvent:
            async for item in app.follow(turn.session_id, live=True):
                if isinstance(item, LiveEvent):
                    return item
            raise AssertionError("the follow ended without a delta")

        return await asyncio.wait_for(read(), TIMEOUT)


def assistant_messages(events: list[Event]) -> list[str]:
    return [
        json.dumps(e.data["message"]["content"])
        for e in events
        if e.type == "message" and e.data["message"]["role"] == "assistant"
    ]


async def test_killed_before_the_reply_was_recorded_the_call_streams_again(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    child = LiveChild(db, "stream")
    (turn_id,) = json.loads(child.line())
    assert child.line() == "held"  # five pieces streamed, the reply not recorded
    seen = await first_delta(db, turn_id)  # a follower in another process saw it stream
    child.kill()

    hold = threading.Event()
    model = StreamingScriptedModel([SECOND_TRY], chunk=2, hold=hold, hold_after=0)
    *items, events = await restarted(db, model, turn_id, hold)
    live = [i for i in items if isinstance(i, LiveEvent)]
    restarts = [n for n, i in enumerate(live) if i.index == 0]
    # what the dead attempt had streamed, then the new attempt from index 0
    stale = "".join(i.data["text"] for i in live[: restarts[-1]])
    assert stale.startswith(seen.data["text"]) and FIRST_TRY.startswith(stale)
    assert "".join(i.data["text"] for i in live[restarts[-1] :]) == SECOND_TRY
    replies = assistant_messages(events)
    assert len(replies) == 1 and SECOND_TRY in replies[0]  # the final message, once
    assert [e.seq for e in items if isinstance(e, Event)] == [e.seq for e in events]


async def test_a_recorded_reply_is_not_streamed_again_after_kill(tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    child = LiveChild(db, "recorded")
    (turn_id,) = json.loads(child.line())
    assert child.line() == "tool started"  # the streamed reply is recorded with the tool's start
    child.kill()

    hold = threading.Event()
    model = StreamingScriptedModel([SECOND_TRY], chunk=2, hold=hold, hold_after=0)
    *items, events = await restarted(db, model, turn_id, hold)
    live = [i for i in items if isinstance(i, LiveEvent)]
    assert {i.type for i in live} == {"text.delta"}  # nothing of the recorded call again
    assert "".join(i.data["text"] for i in live) == SECOND_TRY
    assert len(model.requests) == 1  # the recorded reply was replayed, not asked again
    replies = assistant_messages(events)
    assert len(replies) == 2 and "call_1" in replies[0] and SECOND_TRY in replies[1]
    assert sum("Checking." in r for r in replies) == 1
    assert CALL.text == "Checking."
