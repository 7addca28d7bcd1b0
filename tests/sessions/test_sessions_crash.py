"""Durability across kill -9: a real child process is killed, then the app restarts on its file."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from sessions.crash_app import build, delegating
from turnkit.testing import ScriptedModel

CRASH_APP = Path(__file__).with_name("crash_app.py")


class Child:
    """The crash app in a process of its own; lines of its stdout, read with a timeout."""

    def __init__(self, db: Path, mode: str, *extra: str, script: Path = CRASH_APP) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([*sys.path])}
        self.proc = subprocess.Popen(
            [sys.executable, str(script), str(db), mode, *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def line(self, timeout: float = 30) -> str:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            pytest.fail(f"the child printed nothing within {timeout} s")

    def kill(self) -> None:
        self.proc.kill()  # SIGKILL: no cleanup runs in the child
        self.proc.wait(timeout=10)


def ran_count(db: Path) -> int:
    marker = db.with_suffix(".marker")
    return marker.read_text().count("ran") if marker.exists() else 0


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "crash.db"


async def test_kill_during_a_tool_call_ends_the_turn_with_an_interrupted_result(db: Path) -> None:
    child = Child(db, "tool")
    (turn_id,) = json.loads(child.line())
    assert child.line() == "tool started"
    child.kill()
    assert ran_count(db) == 1

    model = ScriptedModel(["I could not record it."])
    app = build(str(db), db.with_suffix(".marker"), False, model, block=False, executor_id="child")
    async with app:
        turn = await app.wait(turn_id, timeout=30)
        assert turn.status == "completed" and turn.output == "I could not record it."
        history = await app.history(turn.session_id)
        events = await app.events(turn.session_id)
    assert ran_count(db) == 1  # not run again
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    result = history[2].content[0]
    assert result.tool_use_id == "call_1" and result.is_error
    assert "interrupted" in result.content and "not run again" in result.content
    # The recorded tool call was reused: the new model was called once, after the result.
    assert len(model.requests) == 1
    assert [e.type for e in events].count("turn.started") == 1
    assert len({m.to_dict().__repr__() for m in history}) == len(history)


async def test_an_idempotent_tool_runs_again_after_a_kill(db: Path) -> None:
    child = Child(db, "tool", "idempotent")
    (turn_id,) = json.loads(child.line())
    assert child.line() == "tool started"
    child.kill()

    model = ScriptedModel(["Recorded."])
    app = build(str(db), db.with_suffix(".marker"), True, model, block=False, executor_id="child")
    async with app:
        turn = await app.wait(turn_id, timeout=30)
        history = await app.history(turn.session_id)
    assert turn.output == "Recorded."
    assert ran_count(db) == 2
    result = history[2].content[0]
    assert not result.is_error and result.content == "recorded"


async def test_kill_right_after_ten_sends_runs_each_turn_once_in_order(db: Path) -> None:
    child = Child(db, "sends")
    turn_ids = json.loads(child.line())
    child.kill()
    assert len(turn_ids) == 10

    model = ScriptedModel([lambda r: f"echo:{r.last_text}"] * 20)
    app = build(str(db), db.with_suffix(".marker"), False, model, block=False, executor_id="child")
    async with app:
        turns = [await app.wait(turn_id, timeout=30) for turn_id in turn_ids]
        history = await app.history(turns[0].session_id)
        events = await app.events(turns[0].session_id)
    assert [t.status for t in turns] == ["completed"] * 10
    assert [t.output for t in turns] == [f"echo:m{i}" for i in range(10)]
    assert [t.seq for t in turns] == list(range(1, 11))
    started = [e.turn_id for e in events if e.type == "turn.started"]
    assert started == turn_ids  # each once, in the order sent
    assert [e.turn_id for e in events if e.type == "turn.completed"] == turn_ids
    assert [m.text for m in history] == [x for i in range(10) for x in (f"m{i}", f"echo:m{i}")]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))


async def test_a_waiting_subagent_call_gets_the_child_result_after_a_kill(db: Path) -> None:
    child = Child(db, "subagent")
    (turn_id,) = json.loads(child.line())
    assert child.line() == "child running"
    child.kill()

    app = delegating(str(db), ["The research says: found."], ["found"], executor_id="child")
    async with app:
        turn = await app.wait(turn_id, timeout=30)
        history = await app.history(turn.session_id)
        child_key = f"subagent:{turn_id}:d1"
        child_session = await app.create_session("researcher", key=child_key)
        child_events = await app.events(child_session.id)
    assert turn.status == "completed" and turn.output == "The research says: found."
    result = history[2].content[0]
    assert not result.is_error and result.content == "found"
    assert child_session.parent_id == turn.session_id
    assert [e.type for e in child_events].count("turn.started") == 1
    assert [e.type for e in child_events].count("input.received") == 1


async def test_kill_between_an_inputs_commit_and_its_runners_start_runs_it_once(db: Path) -> None:
    child = Child(db, "paused-start")
    (runner_id,) = json.loads(child.line())
    child.kill()  # the input is committed; DBOS never heard of its runner

    model = ScriptedModel([lambda r: f"echo:{r.last_text}"] * 5)
    app = build(str(db), db.with_suffix(".marker"), False, model, block=False, executor_id="child")
    async with app:
        session = await app.find_session("worker", "crash")
        assert session is not None
        events = await app.events(session.id)
        (received,) = [e for e in events if e.type == "input.received"]
        turn = await app.wait(received.turn_id, timeout=30)
        events = await app.events(session.id)
    assert runner_id.startswith(f"run-{session.id}-")
    assert turn.status == "completed" and turn.output == "echo:m0"
    assert [e.type for e in events].count("turn.started") == 1
    assert len(model.requests) == 1  # the one input ran once


def _steered_once(history: list, events: list, turn_id: str, input_id: str) -> None:
    from turnkit.messages import message_text_body

    bodies = [message_text_body(m) for m in history if m.role == "user"]
    assert sum("the blue one" in body for body in bodies) == 1
    steered = [e for e in events if e.type == "input.steered"]
    assert [(e.data["input_id"], e.turn_id) for e in steered] == [(input_id, turn_id)]
    started = [e.turn_id for e in events if e.type == "turn.started"]
    assert started == [turn_id]  # read by the resumed turn, not by a turn of its own


async def test_kill_after_a_steer_is_accepted_delivers_it_once_into_the_resumed_turn(
    db: Path,
) -> None:
    child = Child(db, "steer")
    turn_id, input_id, status = json.loads(child.line())
    child.kill()
    assert status == "steered"

    model = ScriptedModel([lambda r: f"read: {r.last_text}"])
    app = build(str(db), db.with_suffix(".marker"), False, model, block=False, executor_id="child")
    async with app:
        turn = await app.wait(turn_id, timeout=30)
        history = await app.history(turn.session_id)
        events = await app.events(turn.session_id)
    assert turn.status == "completed" and "the blue one" in turn.output
    (request,) = model.requests
    assert [m.role for m in request.messages] == ["user", "assistant", "user", "user"]
    assert request.messages[2].content[0].is_error  # the tool call was interrupted by the kill
    _steered_once(history, events, turn_id, input_id)
    assert ran_count(db) == 1


async def test_kill_after_a_steer_was_taken_in_does_not_deliver_it_twice(db: Path) -> None:
    child = Child(db, "steer-delivered")
    turn_id, input_id, _ = json.loads(child.line())
    assert child.line() == "model called"  # the steer is recorded, the model call not
    child.kill()

    model = ScriptedModel([lambda r: f"read: {r.last_text}"])
    app = build(str(db), db.with_suffix(".marker"), False, model, block=False, executor_id="child")
    async with app:
        turn = await app.wait(turn_id, timeout=30)
        history = await app.history(turn.session_id)
        events = await app.events(turn.session_id)
    assert turn.status == "completed" and "the blue one" in turn.output
    (request,) = model.requests
    assert [m.role for m in request.messages] == ["user", "assistant", "user", "user"]
    assert request.messages[2].content[0].content == "recorded"  # the tool's recorded result
    _steered_once(history, events, turn_id, input_id)
    assert [m.role for m in history] == ["user", "assistant", "user", "user", "assistant"]
