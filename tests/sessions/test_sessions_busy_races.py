"""Input while busy, raced: inputs that meet a turn's end, and bursts (SPEC section 7).

Each interleaving is made, not hoped for: the turn's end is held at a chosen
point (before its transaction, or inside it with the session row locked)
until the test lets it go, and a turn waits on a gate while a burst arrives.
Every case runs on SQLite and on Postgres.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from turnkit.sessions import App
from turnkit.sessions.db.steps import Journal
from turnkit.testing import ScriptedModel

from .busy_support import Gate, gated_reply, reads, turn_inputs

POLICIES = ("queue", "steer", "interrupt", "merge")


class HeldEnd:
    """Holds the next turn end that is armed, at one point, until released."""

    def __init__(self) -> None:
        self.armed = threading.Event()
        self.reached = threading.Event()
        self.released = threading.Event()

    def arm(self) -> None:
        self.reached.clear()
        self.released.clear()
        self.armed.set()

    def hold(self) -> None:
        if self.armed.is_set():
            self.armed.clear()
            self.reached.set()
            assert self.released.wait(20), "the test never released the turn's end"

    async def wait_reached(self) -> None:
        assert await asyncio.to_thread(self.reached.wait, 20), "no turn end was reached"


class HoldInsideTheEnd:
    """An App extension told of each turn's end inside its transaction (the session
    row locked): it holds an armed one there."""

    def __init__(self, held: HeldEnd) -> None:
        self.held = held

    def turn_ended(self, tx: Any, ended: Any) -> None:
        self.held.hold()

    def start(self, app: App) -> None:
        pass

    async def stop(self) -> None:
        pass


def racing_app(db_url: str) -> tuple[App, ScriptedModel]:
    app = App(db_url, fire_schedules=False)
    model = ScriptedModel([lambda r: f"re: {r.last_text}"] * 40)

    @app.agent("racer", model=model)
    def racer() -> str:
        return "Answer."

    return app, model


@pytest.fixture
def held_before_the_end(monkeypatch: pytest.MonkeyPatch) -> HeldEnd:
    """A turn's last model call is done, its end not yet written (the turn is running)."""
    held = HeldEnd()
    finish = Journal.finish

    def holding_finish(self: Journal, *args: Any, **kwargs: Any) -> Any:
        held.hold()
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(Journal, "finish", holding_finish)
    return held


async def test_an_input_arriving_just_before_the_turn_end_is_written(
    any_db_url: str, held_before_the_end: HeldEnd
) -> None:
    """The turn still runs but will make no further model call: a steer runs as its
    own turn next, an interrupt changes nothing of the turn (its end is under way),
    merge and queue get their own turn. Each input is read once, by its own turn."""
    app, model = racing_app(any_db_url)
    async with app:
        session = await app.create_session("racer")
        for policy in POLICIES:
            held_before_the_end.arm()
            first = await app.send(session.id, text=f"go {policy}")
            await held_before_the_end.wait_reached()
            late = await app.send(session.id, text=f"late {policy}", on_busy=policy)
            held_before_the_end.released.set()
            ended = await app.wait(first.turn_id, timeout=20)
            assert (ended.status, ended.output) == ("completed", f"re: go {policy}"), policy
            if policy == "steer":
                assert (late.status, late.turn_id) == ("steered", first.turn_id)
            else:
                assert late.status == "queued" and late.turn_id != first.turn_id, policy
            own = await _own_turn(app, session.id, late.input_id)
            assert own.output == f"re: late {policy}", policy
        events = await app.events(session.id)
    assert not [e for e in events if e.type == "input.steered"]
    expected = [text for policy in POLICIES for text in (f"go {policy}", f"late {policy}")]
    assert [e.data["input"]["text"] for e in events if e.type == "turn.started"] == expected
    for policy in POLICIES:
        assert reads(model, f"late {policy}") == 1, policy


async def test_an_input_arriving_while_the_turn_end_is_being_written(any_db_url: str) -> None:
    """The end holds the session row: the input waits for it, then finds the session
    idle; whatever its policy it gets its own turn, and the ended turn stays as it
    ended (an interrupt that comes too late cancels nothing)."""
    app, model = racing_app(any_db_url)
    held = HeldEnd()
    app.extend(HoldInsideTheEnd(held))
    async with app:
        session = await app.create_session("racer")
        for policy in POLICIES:
            held.arm()
            first = await app.send(session.id, text=f"go {policy}")
            await held.wait_reached()
            sending = asyncio.ensure_future(
                app.send(session.id, text=f"late {policy}", on_busy=policy)
            )
            held.released.set()
            late = await asyncio.wait_for(sending, 20)
            assert late.status == "queued" and late.turn_id != first.turn_id, policy
            ended = await app.wait(first.turn_id, timeout=20)
            assert (ended.status, ended.reason) == ("completed", None), policy
            assert (await app.wait(late.turn_id, timeout=20)).output == f"re: late {policy}"
        events = await app.events(session.id)
    expected = [text for policy in POLICIES for text in (f"go {policy}", f"late {policy}")]
    assert [e.data["input"]["text"] for e in events if e.type == "turn.started"] == expected
    for policy in POLICIES:
        assert reads(model, f"late {policy}") == 1, policy


async def _own_turn(app: App, session_id: str, input_id: str) -> Any:
    """The ended turn that ``input_id`` started (found as its turn.started comes)."""
    async with asyncio.timeout(20):
        async for event in app.follow(session_id):
            if event.type == "turn.started" and event.data["input"]["id"] == input_id:
                return await app.wait(event.turn_id, timeout=20)
    raise AssertionError(f"{input_id} started no turn")


# -- bursts ------------------------------------------------------------------


async def test_twenty_inputs_sent_at_once_while_a_turn_runs_merge_into_one_turn(
    any_db_url: str,
) -> None:
    gate = Gate()
    app = App(any_db_url, fire_schedules=False)
    model = ScriptedModel([gated_reply(gate, "first done"), lambda r: "all twenty"])

    @app.agent("burst", model=model, on_busy="merge")
    def burst() -> str:
        return "Read it all."

    async with app:
        session = await app.create_session("burst")
        first = await app.send(session.id, text="start")
        await gate.wait_entered()
        receipts = await asyncio.gather(
            *(app.send(session.id, text=f"part {i:02d}") for i in range(20))
        )
        statuses = sorted(r.status for r in receipts)
        assert statuses == ["merged"] * 19 + ["queued"]
        (own,) = [r for r in receipts if r.status == "queued"]
        assert {r.turn_id for r in receipts} == {own.turn_id}
        gate.open()
        assert (await app.wait(first.turn_id, timeout=20)).output == "first done"
        turn = await app.wait(own.turn_id, timeout=20)
        assert turn.output == "all twenty"
        events = await app.events(session.id)
        assert await turn_inputs(app, session.id) == [first.input_id, own.input_id]
    text_of = {r.input_id: f"part {i:02d}" for i, r in enumerate(receipts)}
    received = [e for e in events if e.type == "input.received"]
    accepted = [text_of[e.data["input_id"]] for e in received if e.data["input_id"] in text_of]
    read = [turn.input.text, *(m.text for m in turn.input.merged)]
    assert read == accepted and len(read) == 20  # all twenty, in the order they were accepted
    (request,) = [r for r in model.requests if "part 00" in r.messages[-1].text]
    body = request.messages[-1].text
    assert body.startswith("20 inputs arrived before you started")
    assert [body.index(text) for text in accepted] == sorted(body.index(t) for t in accepted)
    for i in range(20):
        assert reads(model, f"part {i:02d}") == 1
