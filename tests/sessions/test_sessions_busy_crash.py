"""kill -9 after a steer is accepted, while the model call it meets runs (SPEC
section 7, "Input while busy"): the input is read once, by the resumed turn or by
its own, and no reply is stored twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sessions.steer_crash_app import build
from sessions.test_sessions_crash import Child
from turnkit.messages import message_text_body
from turnkit.testing import ScriptedModel

STEER_CRASH_APP = Path(__file__).with_name("steer_crash_app.py")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "steer-crash.db"


def user_texts(history: list) -> list[str]:
    return [message_text_body(m) for m in history if m.role == "user"]


async def test_kill_during_the_call_a_steer_met_redoes_the_call_with_it(db: Path) -> None:
    child = Child(db, "in-call", script=STEER_CRASH_APP)
    turn_id, input_id, status = json.loads(child.line())
    child.kill()
    assert status == "steered"

    model = ScriptedModel([lambda r: f"read: {r.last_text}"])
    async with build(str(db), model) as app:
        turn = await app.wait(turn_id, timeout=30)
        history = await app.history(turn.session_id)
        events = await app.events(turn.session_id)
    (request,) = model.requests  # the call the kill cut short, made again with the input
    assert [m.role for m in request.messages] == ["user", "user"]
    assert "the blue one" in message_text_body(request.messages[1])
    assert turn.status == "completed" and "the blue one" in turn.output
    assert [m.role for m in history] == ["user", "user", "assistant"]
    assert sum("the blue one" in text for text in user_texts(history)) == 1
    steered = [(e.data["input_id"], e.turn_id) for e in events if e.type == "input.steered"]
    assert steered == [(input_id, turn_id)]
    assert [e.turn_id for e in events if e.type == "turn.started"] == [turn_id]


async def test_kill_after_the_turn_ended_without_reading_a_steer_runs_it_once_on_its_own(
    db: Path,
) -> None:
    child = Child(db, "after-end", script=STEER_CRASH_APP)
    turn_id, input_id, status = json.loads(child.line())
    assert child.line() == "model called"  # the input's own turn has started
    child.kill()
    assert status == "steered"

    model = ScriptedModel([lambda r: f"read: {r.last_text}"])
    async with build(str(db), model) as app:
        first = await app.wait(turn_id, timeout=30)
        events = await app.events(first.session_id)
        (own,) = [e.turn_id for e in events if e.type == "turn.started" and e.turn_id != turn_id]
        turn = await app.wait(own, timeout=30)
        history = await app.history(first.session_id)
        events = await app.events(first.session_id)
    assert (first.status, first.output) == ("completed", "Red it is.")
    assert turn.status == "completed" and turn.output == "read: the blue one"
    assert turn.input.id == input_id
    assert [(m.role, message_text_body(m)) for m in history] == [
        ("user", "paint it"),
        ("assistant", "Red it is."),
        ("user", "the blue one"),
        ("assistant", "read: the blue one"),
    ]
    assert not [e for e in events if e.type == "input.steered"]
    assert len(model.requests) == 1
