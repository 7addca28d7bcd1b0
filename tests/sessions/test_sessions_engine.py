"""The engine's shape: one owner of a turn's life, turns that start at once, light imports,
sync twins for every coroutine."""

from __future__ import annotations

import asyncio
import inspect
import subprocess
import sys
import threading

import turnkit
from sessions.echo_support import echo_app
from turnkit.sessions import App
from turnkit.testing import ScriptedModel


async def test_end_session_racing_a_claim_never_runs_a_cancelled_turn(postgres_url: str) -> None:
    app = echo_app(postgres_url)
    async with app:
        for round_ in range(200):
            session = await app.create_session("echo")
            receipt = await app.send(session.id, text=f"r{round_}")  # its runner starts now
            await app.end_session(session.id)  # ...racing the runner's claim
            turn = await app.wait(receipt.turn_id, timeout=10)
            events = await app.events(session.id)
            kinds = [e.type for e in events if e.turn_id == receipt.turn_id]
            assert turn.status in ("cancelled", "completed"), (round_, turn.status)
            if "turn.cancelled" in kinds:
                assert "turn.started" not in kinds[kinds.index("turn.cancelled") :], kinds
            assert kinds.count("turn.started") <= 1 and kinds[-1].startswith("turn."), kinds
            assert await asyncio.to_thread(app.runtime.store.running_turns, session.id) == []
            assert (await app.get_session(session.id)).status == "ended"


async def test_turns_start_at_once_without_waiting_for_a_queue_poll(db_url: str) -> None:
    app = echo_app(db_url, polling_interval=60.0)  # a turn waiting for a poll would time out
    async with app:
        sessions = [await app.create_session("echo") for _ in range(3)]
        receipts = [await app.send(s.id, text=f"m{i}") for s in sessions for i in range(3)]
        turns = [await app.wait(r.turn_id, timeout=10) for r in receipts]
    assert [t.output for t in turns] == [f"echo:m{i}" for _ in sessions for i in range(3)]


def test_the_hooks_and_records_load_neither_sqlalchemy_nor_dbos() -> None:
    code = (
        "import sys, turnkit\n"
        "turnkit.use_input, turnkit.AgentInput, turnkit.subagent, turnkit.use_tool\n"
        "import turnkit.sessions\n"
        "turnkit.sessions.Turn, turnkit.sessions.Receipt\n"
        "print(sorted(m for m in ('sqlalchemy', 'dbos') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_public_coroutine_of_the_app_has_a_sync_twin_with_its_signature() -> None:
    coroutines = {
        name: member
        for name, member in inspect.getmembers(turnkit.App, inspect.iscoroutinefunction)
        if not name.startswith("_")
    }
    assert {"send", "wait", "create_session", "get_turn", "find_session"} <= set(coroutines)
    for name, coroutine in coroutines.items():
        twin = getattr(turnkit.App, f"{name}_sync", None)
        assert twin is not None, f"App.{name} has no {name}_sync"
        expected = inspect.signature(coroutine)
        assert inspect.signature(twin).parameters == expected.parameters, name


async def test_open_session_gets_or_creates_and_says_which(db_url: str) -> None:
    app = echo_app(db_url)
    async with app:
        first, created = await app.open_session("echo", key="k")
        again, created_again = await app.open_session("echo", key="k")
    assert created and not created_again and again.id == first.id


async def test_a_process_runs_at_most_max_running_turns_however_their_runners_started(
    db_url: str,
) -> None:
    """Two slots: two runners start at once, the rest go to the queue, and the ones
    this process takes from the queue wait for a slot rather than run beside them."""
    release = threading.Event()
    lock = threading.Lock()
    running, peak = [0], [0]

    async def slow(request: object) -> str:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        try:
            await asyncio.to_thread(release.wait, 20)
        finally:
            with lock:
                running[0] -= 1
        return "done"

    app = App(db_url, max_running=2)

    @app.agent("slow", model=ScriptedModel([slow] * 6))
    def agent() -> str:
        return "Slow."

    async with app:
        sessions = [await app.create_session("slow") for _ in range(6)]
        receipts = [await app.send(s.id, text="go") for s in sessions]
        while running[0] < 2:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)  # the queue is polled every 20 ms meanwhile
        assert peak[0] == 2
        release.set()
        turns = [await app.wait(r.turn_id, timeout=20) for r in receipts]
    assert [t.status for t in turns] == ["completed"] * 6
    assert peak[0] == 2


async def test_a_turn_waiting_for_its_sub_agent_lends_it_the_only_slot(db_url: str) -> None:
    research = turnkit.subagent("researcher", "Find facts.", wait=True)
    ask = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "c1", "name": "researcher", "input": {"task": "X"}}],
    }
    app = App(db_url, max_running=1)

    @app.agent("researcher", model=ScriptedModel(["X is 42."]))
    def researcher() -> str:
        return "Research."

    @app.agent("lead", model=ScriptedModel([ask, "It is 42."]), tools=[research])
    def lead() -> str:
        return "Lead."

    async with app:
        parent = await app.create_session("lead")
        turn = await app.wait((await app.send(parent.id, text="X?")).turn_id, timeout=20)
    assert turn.status == "completed" and turn.output == "It is 42."
