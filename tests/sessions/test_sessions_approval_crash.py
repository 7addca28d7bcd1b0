"""Approvals across kill -9: a held refund runs once after a yes, never without one.

A real child process (``approval_crash_app.py``) holds a refund call, then is
killed before the question is asked (while a neighbouring call runs), before
the decision, after it is recorded (an approval or a denial), while the
approved call runs, or after it ran; the app restarts on the same
database (SQLite and Postgres) and the refund has run at most once, never
after a denial.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from sessions.approval_crash_app import build
from sessions.test_sessions_crash import Child
from turnkit.errors import NoApprovalOpenError
from turnkit.sessions import App, Turn
from turnkit.testing import ScriptedModel

APPROVAL_APP = Path(__file__).with_name("approval_crash_app.py")


@dataclass(frozen=True)
class Db:
    """Where the child and the restarted app keep their sessions, and the refund's runs."""

    url: str
    marker: Path

    def child(self, mode: str, *extra: str) -> Child:
        return Child(self.url, str(self.marker), mode, *extra, script=APPROVAL_APP)  # type: ignore[arg-type]

    def app(self, replies: list, idempotent: bool = False) -> App:
        return build(self.url, self.marker, idempotent, ScriptedModel(replies), block=False)

    def runs(self) -> int:
        return self.marker.read_text().count("ran") if self.marker.exists() else 0


@pytest.fixture
def db(any_db_url: str, tmp_path: Path) -> Db:
    return Db(any_db_url, tmp_path / "refunds.marker")


async def decided_turn(app: App, session_id: str) -> Turn:
    """The turn that carries out the session's decision, once it has ended."""
    events = await app.events(session_id)
    (turn_id,) = {e.turn_id for e in events if e.type == "approval.decided"}
    return await app.wait(turn_id, timeout=30)


async def first_turn(app: App, session_id: str) -> Turn:
    """The session's first turn, once it has ended (it was running at the kill)."""
    (turn_id,) = {e.turn_id for e in await app.events(session_id) if e.type == "turn.started"}
    return await app.wait(turn_id, timeout=30)


async def test_a_kill_before_the_decision_keeps_the_call_waiting_unrun(db: Db) -> None:
    child = db.child("held")
    (session_id,) = json.loads(child.line())
    child.kill()
    app = db.app(["Refunded."])
    async with app:
        session = await app.get_session(session_id)
        assert session.status == "awaiting_input"
        assert [a.call_id for a in session.question.approvals] == ["r1"]
        assert db.runs() == 0
        receipt = await app.approve(session_id, True)
        turn = await app.wait(receipt.turn_id, timeout=30)
        history = await app.history(session_id)
    assert turn.output == "Refunded." and db.runs() == 1
    assert history[2].content[0].content == "refunded 42"


async def test_a_kill_while_a_neighbour_runs_still_asks_and_never_runs_the_held_call(
    db: Db,
) -> None:
    child = db.child("neighbour")
    (session_id,) = json.loads(child.line())
    assert child.line() == "lookup started"  # the refund is held; the question not yet asked
    child.kill()
    app = db.app(["Refunded."])
    async with app:
        turn = await first_turn(app, session_id)
        assert turn.question is not None
        assert [a.call_id for a in turn.question.approvals] == ["r1"]
        assert (await app.get_session(session_id)).status == "awaiting_input"
        assert db.runs() == 0
        receipt = await app.approve(session_id, True)
        done = await app.wait(receipt.turn_id, timeout=30)
        history = await app.history(session_id)
        events = await app.events(session_id)
    assert done.output == "Refunded." and db.runs() == 1
    lookup, refund = history[2].content
    assert lookup.tool_use_id == "l1" and lookup.is_error and "interrupted" in lookup.content
    assert (refund.tool_use_id, refund.content) == ("r1", "refunded 42")
    assert [e.type for e in events].count("question.asked") == 1


async def test_a_kill_after_the_decision_is_recorded_runs_the_call_once(db: Db) -> None:
    child = db.child("decided")
    (session_id,) = json.loads(child.line())
    assert child.line() == "decided"
    child.kill()
    assert db.runs() == 0
    app = db.app(["Refunded."])
    async with app:
        turn = await decided_turn(app, session_id)
        history = await app.history(session_id)
        events = await app.events(session_id)
    assert turn.status == "completed" and turn.output == "Refunded."
    assert db.runs() == 1
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert history[2].content[0].content == "refunded 42"
    assert [e.type for e in events].count("approval.decided") == 1


async def test_a_kill_after_a_denial_is_recorded_never_runs_the_call(db: Db) -> None:
    child = db.child("denied")
    (session_id,) = json.loads(child.line())
    assert child.line() == "decided"
    child.kill()
    app = db.app(["I did not refund it."])
    async with app:
        turn = await decided_turn(app, session_id)
        history = await app.history(session_id)
        events = await app.events(session_id)
        with pytest.raises(NoApprovalOpenError):
            await app.approve(session_id, True)  # the denial stands: nothing left to approve
    assert db.runs() == 0
    assert turn.status == "completed" and turn.output == "I did not refund it."
    result = history[2].content[0]
    assert result.tool_use_id == "r1" and result.is_error
    assert "denied" in result.content and "too much" in result.content
    (decided,) = [e.data for e in events if e.type == "approval.decided"]
    assert decided["approved"] is False and decided["reason"] == "too much"
    assert not [e for e in events if e.type == "tool.started"]


async def test_a_kill_while_the_approved_call_runs_answers_it_as_interrupted(db: Db) -> None:
    child = db.child("running")
    (session_id,) = json.loads(child.line())
    assert child.line() == "tool started"
    child.kill()
    app = db.app(["The refund may not have gone through."])
    async with app:
        turn = await decided_turn(app, session_id)
        history = await app.history(session_id)
    assert db.runs() == 1  # never run twice
    assert turn.output == "The refund may not have gone through."
    result = history[2].content[0]
    assert result.tool_use_id == "r1" and result.is_error and "interrupted" in result.content
    assert len(history) == 4


async def test_an_idempotent_approved_call_runs_again_after_a_kill(db: Db) -> None:
    child = db.child("running", "idempotent")
    (session_id,) = json.loads(child.line())
    assert child.line() == "tool started"
    child.kill()
    app = db.app(["Refunded."], idempotent=True)
    async with app:
        turn = await decided_turn(app, session_id)
        history = await app.history(session_id)
    assert db.runs() == 2 and turn.output == "Refunded."
    assert history[2].content[0].content == "refunded 42"


async def test_a_kill_after_the_approved_call_ran_keeps_its_result_and_runs_it_once(
    db: Db,
) -> None:
    child = db.child("ran")
    (session_id,) = json.loads(child.line())
    assert child.line() == "model called"  # the refund ran; the next model call is under way
    child.kill()
    assert db.runs() == 1
    app = db.app(["Refunded."])
    async with app:
        turn = await decided_turn(app, session_id)
        history = await app.history(session_id)
        events = await app.events(session_id)
    assert db.runs() == 1  # its recorded result is reused
    assert turn.status == "completed" and turn.output == "Refunded."
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    result = history[2].content[0]
    assert result.content == "refunded 42" and not result.is_error
    assert [e.data["name"] for e in events if e.type == "tool.started"] == ["refund"]
