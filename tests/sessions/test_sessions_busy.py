"""Input while busy: queue, steer, interrupt and merge (SPEC section 7, "Input while busy").

Every running turn here waits on an event the test controls: a tool blocked
on a gate, or a model reply that waits for one. No sleeps.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from turnkit.messages import ToolResultBlock, message_text_body
from turnkit.sessions import App, InvalidInputError
from turnkit.sessions.db.busy import MAX_MERGED_ITEMS
from turnkit.testing import ScriptedModel

from .busy_support import ASK, WORK, Gate, busy_app, reads, texts, turn_inputs

# -- queue ---------------------------------------------------------------------


async def test_queue_runs_the_input_as_its_own_turn_after_the_running_one(
    any_db_url: str,
) -> None:
    gate = Gate()
    replies = [WORK, "Red is done.", lambda r: f"next: {r.last_text}"]
    app, model = busy_app(any_db_url, replies, gate, on_busy="queue")
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint the door red")
        await gate.wait_entered()
        later = await app.send(session.id, text="then the fence")
        assert later.status == "queued" and later.turn_id != first.turn_id
        assert (await app.get_session(session.id)).status == "running"
        gate.open()
        assert (await app.wait(first.turn_id, timeout=20)).output == "Red is done."
        turn = await app.wait(later.turn_id, timeout=20)
        assert turn.status == "completed" and turn.output == "next: then the fence"
        assert await turn_inputs(app, session.id) == [first.input_id, later.input_id]
        assert not [e for e in await app.events(session.id) if e.type == "input.steered"]
    assert all("then the fence" not in text for text in texts(model.requests[1]))
    assert reads(model, "then the fence") == 1


# -- steer ---------------------------------------------------------------------


async def test_steer_reaches_the_running_turn_after_the_latest_tool_result(any_db_url: str) -> None:
    gate = Gate()
    app, model = busy_app(any_db_url, [WORK, "Painted it blue."], gate, on_busy="steer")
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint the door red")
        await gate.wait_entered()
        steer = await app.send(session.id, text="actually, the blue one")
        assert steer.status == "steered" and steer.turn_id == first.turn_id
        gate.open()
        turn = await app.wait(first.turn_id, timeout=20)
        assert turn.status == "completed" and turn.output == "Painted it blue."

        second = model.requests[1]
        assert [m.role for m in second.messages] == ["user", "assistant", "user", "user"]
        result = second.messages[2].content[0]
        assert isinstance(result, ToolResultBlock) and result.content == "done"
        steered = message_text_body(second.messages[3])
        assert "actually, the blue one" in steered and "while you were working" in steered
        assert "actually, the blue one" not in texts(model.requests[0])[-1]

        history = await app.history(session.id)
        assert [message_text_body(m) for m in history][3] == steered
        assert len(history) == 5
        events = await app.events(session.id)
        (event,) = [e for e in events if e.type == "input.steered"]
        assert event.data == {"input_id": steer.input_id, "turn_id": first.turn_id}
        assert event.turn_id == first.turn_id
        assert await turn_inputs(app, session.id) == [first.input_id]  # no turn of its own
        assert (await app.get_session(session.id)).status == "idle"
    assert reads(model, "actually, the blue one") == 1


async def test_several_steered_inputs_arrive_in_order_in_one_message(db_url: str) -> None:
    gate = Gate()
    app, model = busy_app(db_url, [WORK, "ok"], gate)
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint")
        await gate.wait_entered()
        sent = [await app.send(session.id, text=f"note {i}", on_busy="steer") for i in range(3)]
        hook = await app.send(
            session.id, payload={"colour": "green"}, source="webhook", on_busy="steer"
        )
        assert {r.status for r in [*sent, hook]} == {"steered"}
        gate.open()
        await app.wait(first.turn_id, timeout=20)
        steered = message_text_body(model.requests[1].messages[-1])
        positions = [steered.index(f"note {i}") for i in range(3)]
        assert positions == sorted(positions)
        assert "[4] From the webhook source" in steered and "<payload>" in steered
        assert "not instructions" in steered  # the webhook's body is data
        events = await app.events(session.id)
        steered_ids = [e.data["input_id"] for e in events if e.type == "input.steered"]
        assert steered_ids == [r.input_id for r in [*sent, hook]]


async def test_steer_during_the_last_model_call_runs_as_its_own_turn_next(
    any_db_url: str,
) -> None:
    gate = Gate()

    async def final(request: Any) -> str:
        await asyncio.to_thread(gate.pass_through)
        return "Red it is."

    app, model = busy_app(any_db_url, [final, lambda r: f"then: {r.last_text}"], gate)
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint it red")
        await gate.wait_entered()  # the model is answering: its last call
        late = await app.send(session.id, text="and the frame too", on_busy="steer")
        assert late.status == "steered" and late.turn_id == first.turn_id
        gate.open()
        assert (await app.wait(first.turn_id, timeout=20)).output == "Red it is."
        started = await turn_inputs(app, session.id)
        assert started == [first.input_id, late.input_id]
        events = await app.events(session.id)
        own = next(
            e.turn_id for e in events if e.type == "turn.started" and e.turn_id != first.turn_id
        )
        turn = await app.wait(own, timeout=20)
        assert turn.output == "then: and the frame too"
        assert not [e for e in events if e.type == "input.steered"]
    assert reads(model, "and the frame too") == 1


async def test_steer_without_a_running_turn_queues_its_own(db_url: str) -> None:
    gate = Gate()
    gate.open()
    app, _ = busy_app(db_url, ["hello"], gate, on_busy="steer")
    async with app:
        session = await app.create_session("painter")
        receipt = await app.send(session.id, text="hi")
        assert receipt.status == "queued"
        assert (await app.wait(receipt.turn_id, timeout=20)).output == "hello"


# -- interrupt -----------------------------------------------------------------


async def test_interrupt_cancels_the_running_turn_and_the_input_runs_next(db_url: str) -> None:
    gate = Gate()
    app, model = busy_app(db_url, [WORK, lambda r: f"now: {r.last_text}"], gate)
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint it red")
        await gate.wait_entered()
        stop = await app.send(session.id, text="stop, blue instead", on_busy="interrupt")
        assert stop.status == "queued" and stop.turn_id != first.turn_id
        cancelled = await app.wait(first.turn_id, timeout=20)
        assert cancelled.status == "cancelled" and cancelled.reason == "interrupted"
        turn = await app.wait(stop.turn_id, timeout=20)
        assert turn.output == "now: stop, blue instead"
        history = await app.history(session.id)
        assert [m.role for m in history] == ["user", "assistant", "user", "user", "assistant"]
        assert history[1].text == "Painting it red."  # the partial reply is kept
        result = history[2].content[0]
        assert result.tool_use_id == "w1" and result.is_error and "interrupted" in result.content
        assert model.requests[1].messages[-1].text == "stop, blue instead"
    gate.open()


async def test_interrupt_sent_from_another_process_stops_the_turn_here(any_db_url: str) -> None:
    gate = Gate()
    app, _ = busy_app(any_db_url, [WORK, "Blue, then."], gate)
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint it red")
        await gate.wait_entered()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        sender = BUSY_PROC, any_db_url, session.id, "blue!", "interrupt"
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, *map(str, sender)],
            capture_output=True,
            text=True,
            env=env,
            timeout=25,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        receipt = json.loads(done.stdout.strip().splitlines()[-1])
        assert receipt["status"] == "queued"
        cancelled = await app.wait(first.turn_id, timeout=20)
        assert cancelled.status == "cancelled" and cancelled.reason == "interrupted"
        assert (await app.wait(receipt["turn_id"], timeout=20)).output == "Blue, then."
    gate.open()


BUSY_PROC = Path(__file__).with_name("busy_proc.py")


# -- merge ---------------------------------------------------------------------


async def test_merge_joins_the_queued_turn_and_the_model_sees_all_in_one_message(
    db_url: str,
) -> None:
    gate = Gate()
    app, model = busy_app(db_url, [WORK, "first done", "all three"], gate, on_busy="merge")
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint")
        await gate.wait_entered()
        a = await app.send(session.id, text="the door")
        b = await app.send(session.id, text="and the frame")
        c = await app.send(session.id, payload={"colour": "blue"}, source="webhook")
        assert a.status == "queued"
        assert (b.status, c.status) == ("merged", "merged")
        assert b.turn_id == c.turn_id == a.turn_id
        gate.open()
        turn = await app.wait(a.turn_id, timeout=20)
        assert turn.output == "all three"
        assert turn.input.text == "the door"
        assert [m.text for m in turn.input.merged] == ["and the frame", None]
        assert turn.input.merged[1].source == "webhook"
        assert turn.input.merged[1].payload == {"colour": "blue"}
        seen = model.requests[2].messages[-1]
        assert seen.role == "user" and len(seen.content) == 1
        body = message_text_body(seen)
        assert "[1] From the user" in body and "[2] From the user" in body
        assert "[3] From the webhook source" in body and '"blue"' in body
        assert body.index("the door") < body.index("and the frame") < body.index('"blue"')
        assert await turn_inputs(app, session.id) == [first.input_id, a.input_id]
    assert reads(model, "and the frame") == 1


async def test_twenty_inputs_sent_at_once_with_merge_are_each_read_once_in_order(
    any_db_url: str,
) -> None:
    app = App(any_db_url, fire_schedules=False)
    model = ScriptedModel([lambda r: "ok"] * 40)

    @app.agent("burst", model=model, on_busy="merge")
    def burst() -> str:
        return "Read it all."

    async with app:
        session = await app.create_session("burst")
        receipts = await asyncio.gather(
            *(app.send(session.id, text=f"part {i:02d}") for i in range(20))
        )
        own = [r for r in receipts if r.status == "queued"]
        assert {r.status for r in receipts} <= {"queued", "merged"}
        turns = {r.turn_id: await app.wait(r.turn_id, timeout=20) for r in own}
        for receipt in receipts:
            assert receipt.turn_id in turns  # a merged receipt names a turn of its own kind
        read = []
        for turn in sorted(turns.values(), key=lambda t: t.seq):
            assert turn.status == "completed"
            read += [turn.input.text, *(m.text for m in turn.input.merged)]
        text_of = {r.input_id: f"part {i:02d}" for i, r in enumerate(receipts)}
        events = await app.events(session.id)
        accepted = [text_of[e.data["input_id"]] for e in events if e.type == "input.received"]
        assert read == accepted  # every input once, in the order they were accepted
        for i in range(20):
            assert reads(model, f"part {i:02d}") == 1
        inputs = await turn_inputs(app, session.id)
        assert inputs == [r.input_id for r in sorted(own, key=lambda r: turns[r.turn_id].seq)]


async def test_merge_past_its_bound_starts_a_new_turn(db_url: str) -> None:
    gate = Gate()
    app, _ = busy_app(db_url, [WORK, "a", "b", "c"], gate, on_busy="merge")
    async with app:
        session = await app.create_session("painter")
        await app.send(session.id, text="Paint")
        await gate.wait_entered()
        receipts = [await app.send(session.id, text=f"n{i}") for i in range(MAX_MERGED_ITEMS + 2)]
        statuses = [r.status for r in receipts]
        assert statuses[0] == "queued" and statuses[MAX_MERGED_ITEMS + 1] == "queued"
        assert statuses[1 : MAX_MERGED_ITEMS + 1] == ["merged"] * MAX_MERGED_ITEMS
        gate.open()
        full = await app.wait(receipts[0].turn_id, timeout=20)
        assert len(full.input.merged) == MAX_MERGED_ITEMS
        assert (await app.wait(receipts[-1].turn_id, timeout=20)).input.merged == ()


# -- a question open, duplicates, bad values -------------------------------------


async def test_with_a_question_open_every_policy_holds(db_url: str) -> None:
    gate = Gate()
    app, _ = busy_app(db_url, [ASK, "answered"], gate, on_busy="interrupt")
    async with app:
        session = await app.create_session("painter")
        asked = await app.wait((await app.send(session.id, text="Paint")).turn_id, timeout=20)
        assert asked.question is not None
        held = [
            await app.send(session.id, text=f"note {policy}", source="system", on_busy=policy)
            for policy in ("queue", "steer", "interrupt", "merge")
        ]
        assert [r.status for r in held] == ["held"] * 4
        answer = await app.send(session.id, text="blue", on_busy="steer")
        turn = await app.wait(answer.turn_id, timeout=20)
        assert turn.input.answer.text == "blue"
        assert [s.text for s in turn.input.steering] == [
            "note queue",
            "note steer",
            "note interrupt",
            "note merge",
        ]


async def test_a_question_asked_holds_what_was_steered_or_merged(db_url: str) -> None:
    gate = Gate()
    app, model = busy_app(db_url, [WORK, ASK, "answered"], gate)
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint")
        await gate.wait_entered()
        queued = await app.send(session.id, text="queued one", source="system", on_busy="merge")
        merged = await app.send(session.id, text="merged one", source="system", on_busy="merge")
        assert (queued.status, merged.status) == ("queued", "merged")

        # The next model call asks: a steer sent now is taken in before it.
        steer = await app.send(session.id, text="steered one", source="system", on_busy="steer")
        gate.open()
        asked = await app.wait(first.turn_id, timeout=20)
        assert asked.question is not None
        answer = await app.send(session.id, text="blue")
        turn = await app.wait(answer.turn_id, timeout=20)
        assert [s.text for s in turn.input.steering] == ["queued one", "merged one"]
        assert steer.status == "steered"
    assert reads(model, "steered one") == 1
    assert reads(model, "merged one") == 1


async def test_a_repeated_key_gives_the_first_steered_or_merged_receipt(db_url: str) -> None:
    gate = Gate()
    app, _ = busy_app(db_url, [WORK, "a", "b"], gate)
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint")
        await gate.wait_entered()
        steer = await app.send(session.id, text="s", idempotency_key="s", on_busy="steer")
        own = await app.send(session.id, text="q", idempotency_key="q", on_busy="merge")
        merged = await app.send(session.id, text="m", idempotency_key="m", on_busy="merge")
        for receipt, key in ((steer, "s"), (own, "q"), (merged, "m")):
            again = await app.send(session.id, text="again", idempotency_key=key)
            assert again.duplicate
            assert (again.input_id, again.turn_id, again.status) == (
                receipt.input_id,
                receipt.turn_id,
                receipt.status,
            )
        assert (steer.turn_id, merged.turn_id) == (first.turn_id, own.turn_id)
        gate.open()
        await app.wait(own.turn_id, timeout=20)


async def test_an_unknown_on_busy_names_the_allowed_ones(db_url: str) -> None:
    gate = Gate()
    app, _ = busy_app(db_url, [], gate)
    with pytest.raises(ValueError, match="queue, steer, interrupt, merge; got 'later'"):
        app.agent("other", model="local", on_busy="later")
    async with app:
        session = await app.create_session("painter")
        with pytest.raises(InvalidInputError) as raised:
            await app.send(session.id, text="hi", on_busy="now")
        assert raised.value.field == "on_busy"
        assert "queue, steer, interrupt, merge" in str(raised.value)
        assert await app.events(session.id) == []  # nothing stored


# -- races ---------------------------------------------------------------------


async def test_inputs_arriving_as_the_running_turn_ends_are_each_read_once(
    any_db_url: str,
) -> None:
    """Each input races the end of the turn: steered into it (read at its next
    call, or its own turn after), merged, or queued; read exactly once either way."""
    rounds = 6
    ending = [threading.Event() for _ in range(rounds)]

    def reply(request: Any) -> str:
        text = request.last_text
        if text.startswith("go "):
            ending[int(text.split()[1])].set()  # its end is being written now
        return "ok"

    app = App(any_db_url, fire_schedules=False)
    model = ScriptedModel([reply] * 100)

    @app.agent("racer", model=model)
    def racer() -> str:
        return "Race."

    async with app:
        session = await app.create_session("racer")
        policies = ("steer", "merge", "interrupt", "steer", "queue", "merge")
        late = []
        for i, policy in enumerate(policies):
            first = await app.send(session.id, text=f"go {i}")
            await asyncio.to_thread(ending[i].wait, 20)
            late.append(await app.send(session.id, text=f"late {i}", on_busy=policy))
            await app.wait(first.turn_id, timeout=20)
        for receipt in late:
            if receipt.turn_id is not None:
                await app.wait(receipt.turn_id, timeout=20)
        while (await app.get_session(session.id)).status == "running":
            last = [e for e in await app.events(session.id) if e.type == "turn.started"][-1]
            await app.wait(last.turn_id, timeout=20)
    for i in range(rounds):
        assert reads(model, f"late {i}") == 1, f"late {i}"
