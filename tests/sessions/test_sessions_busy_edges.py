"""Input while busy where policies meet: an interrupt mid-call, an interrupt behind
queued inputs or steered ones, a steer into a turn that ends asking (SPEC section 7).

As in test_sessions_busy.py, every running turn waits on a gate the test opens.
"""

from __future__ import annotations

from turnkit.messages import message_text_body

from .busy_support import ASK, WORK, Gate, busy_app, gated_reply, reads, started_texts


async def test_interrupt_during_a_model_call_cancels_it_and_the_input_runs_next(
    any_db_url: str,
) -> None:
    gate = Gate()
    replies = [gated_reply(gate, "red, as asked"), lambda r: f"now: {r.last_text}"]
    app, model = busy_app(any_db_url, replies, gate)
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint it red")
        await gate.wait_entered()  # the model is answering
        stop = await app.send(session.id, text="no, blue", on_busy="interrupt")
        assert stop.status == "queued"
        cancelled = await app.wait(first.turn_id, timeout=20)
        assert (cancelled.status, cancelled.reason) == ("cancelled", "interrupted")
        assert cancelled.output is None
        assert (await app.wait(stop.turn_id, timeout=20)).output == "now: no, blue"
        history = await app.history(session.id)
        events = await app.events(session.id)
    gate.open()
    # The reply the interrupted call was making is not kept: nothing of it was done.
    assert [(m.role, message_text_body(m)) for m in history] == [
        ("user", "Paint it red"),
        ("user", "no, blue"),
        ("assistant", "now: no, blue"),
    ]
    assert [message_text_body(m) for m in model.requests[1].messages] == [
        "Paint it red",
        "no, blue",
    ]
    (ended,) = [e for e in events if e.type == "turn.cancelled"]
    assert ended.turn_id == first.turn_id and ended.data == {"reason": "interrupted"}


async def test_an_interrupt_behind_queued_inputs_runs_after_them_in_order(db_url: str) -> None:
    """Turns keep the order their inputs were accepted in: the interrupt stops the
    running turn, as ``cancel`` does, and the inputs queued before it still run first."""
    gate = Gate()
    echo = [lambda r: f"did: {r.last_text}"] * 2
    app, _ = busy_app(db_url, [WORK, *echo], gate)
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint it red")
        await gate.wait_entered()
        tidy = await app.send(session.id, text="then tidy up")
        stop = await app.send(session.id, text="stop: blue", on_busy="interrupt")
        cancelled = await app.wait(first.turn_id, timeout=20)
        assert cancelled.reason == "interrupted"
        assert (await app.wait(tidy.turn_id, timeout=20)).output == "did: then tidy up"
        assert (await app.wait(stop.turn_id, timeout=20)).output == "did: stop: blue"
        started = await started_texts(app, session.id)
    gate.open()
    assert started == ["Paint it red", "then tidy up", "stop: blue"]


async def test_a_steered_input_not_yet_read_when_an_interrupt_comes_runs_on_its_own(
    any_db_url: str,
) -> None:
    gate = Gate()
    echo = [lambda r: f"did: {r.last_text}"] * 2
    app, model = busy_app(any_db_url, [WORK, *echo], gate)
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint it red")
        await gate.wait_entered()
        steer = await app.send(session.id, text="and the frame", on_busy="steer")
        stop = await app.send(session.id, text="stop: blue", on_busy="interrupt")
        assert steer.status == "steered" and stop.status == "queued"
        cancelled = await app.wait(first.turn_id, timeout=20)
        assert cancelled.reason == "interrupted"
        assert (await app.wait(stop.turn_id, timeout=20)).output == "did: stop: blue"
        started = await started_texts(app, session.id)
        events = await app.events(session.id)
    gate.open()
    assert started == ["Paint it red", "and the frame", "stop: blue"]
    assert not [e for e in events if e.type == "input.steered"]
    assert reads(model, "and the frame") == 1


async def test_a_steer_during_the_call_that_asks_is_held_for_the_answer(any_db_url: str) -> None:
    """The turn ends asking a question right after the steer came: no model call is
    left to read it, so it is held like any input while a question is open, and the
    answer's turn reads it (its receipt, given at acceptance, said steered)."""
    gate = Gate()
    app, model = busy_app(any_db_url, [gated_reply(gate, ASK), "blue, with the frame"], gate)
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint it")
        await gate.wait_entered()  # the model is making the call that asks
        steer = await app.send(session.id, text="and the frame", on_busy="steer")
        assert (steer.status, steer.turn_id) == ("steered", first.turn_id)
        gate.open()
        asked = await app.wait(first.turn_id, timeout=20)
        assert asked.question is not None and asked.question.text == "Which?"
        answer = await app.send(session.id, text="blue")
        turn = await app.wait(answer.turn_id, timeout=20)
        started = await started_texts(app, session.id)
    assert turn.output == "blue, with the frame"
    assert turn.input.answer.text == "blue"
    assert [held.text for held in turn.input.steering] == ["and the frame"]
    assert started == ["Paint it", "blue"]  # the steered input ran no turn of its own
    assert reads(model, "and the frame") == 1


async def test_a_repeated_key_gives_the_first_receipt_after_a_question_held_the_input(
    any_db_url: str,
) -> None:
    """Inputs steered, queued and merged while the turn makes the call that asks are
    held by the question; sending one again with its key still gives its first receipt."""
    gate = Gate()
    app, _ = busy_app(any_db_url, [gated_reply(gate, ASK), "answered"], gate)
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint it")
        await gate.wait_entered()
        sent = {
            key: await app.send(session.id, text=key, idempotency_key=key, on_busy=policy)
            for key, policy in (("s", "steer"), ("q", "merge"), ("m", "merge"), ("k", "queue"))
        }
        assert [r.status for r in sent.values()] == ["steered", "queued", "merged", "queued"]
        gate.open()
        assert (await app.wait(first.turn_id, timeout=20)).question is not None
        for key, receipt in sent.items():
            again = await app.send(session.id, text="again", idempotency_key=key)
            assert again.duplicate, key
            assert (again.input_id, again.turn_id, again.status) == (
                receipt.input_id,
                receipt.turn_id,
                receipt.status,
            ), key
        answer = await app.send(session.id, text="blue")
        turn = await app.wait(answer.turn_id, timeout=20)
    assert [held.text for held in turn.input.steering] == ["s", "q", "m", "k"]


async def test_the_readme_example_of_the_four_policies_does_what_it_says(db_url: str) -> None:
    gate = Gate()
    echo = [lambda r: f"did: {r.last_text}"] * 3
    app, model = busy_app(db_url, [WORK, *echo], gate, on_busy="steer")
    async with app:
        s = await app.create_session("painter")
        first = await app.send(s.id, text="Paint the door red")
        await gate.wait_entered()
        steer = await app.send(s.id, text="actually, the blue one")
        assert (steer.status, steer.turn_id) == ("steered", first.turn_id)
        queue = await app.send(s.id, text="then tidy up", on_busy="queue")
        assert queue.status == "queued"
        merge = await app.send(s.id, text="and wash the brushes", on_busy="merge")
        assert (merge.status, merge.turn_id) == ("merged", queue.turn_id)
        stop = await app.send(s.id, text="stop, paint the window", on_busy="interrupt")
        assert stop.status == "queued"
        assert (await app.wait(first.turn_id, timeout=20)).reason == "interrupted"
        await app.wait(stop.turn_id, timeout=20)
        started = await started_texts(app, s.id)
    gate.open()
    # The interrupt came before the turn's next model call: the steered input was
    # not read by it, so it runs as its own turn, first of those waiting.
    assert started == [
        "Paint the door red",
        "actually, the blue one",
        "then tidy up",
        "stop, paint the window",
    ]
    for text in ("actually, the blue one", "and wash the brushes", "stop, paint the window"):
        assert reads(model, text) == 1, text


async def test_a_merge_after_a_steer_does_not_join_the_steered_inputs_fallback(
    any_db_url: str,
) -> None:
    """The steered input's own turn is only its fallback (folded once the running turn
    reads it): a merge that came after it gets a turn of its own, and is read once."""
    gate = Gate()
    app, model = busy_app(any_db_url, [WORK, "blue it is", lambda r: f"did: {r.last_text}"], gate)
    async with app:
        session = await app.create_session("painter")
        first = await app.send(session.id, text="Paint it red")
        await gate.wait_entered()
        steer = await app.send(session.id, text="the blue one", on_busy="steer")
        merge = await app.send(session.id, text="and the frame", on_busy="merge")
        assert steer.status == "steered"
        assert merge.status == "queued" and merge.turn_id != first.turn_id
        gate.open()
        assert (await app.wait(first.turn_id, timeout=20)).output == "blue it is"
        turn = await app.wait(merge.turn_id, timeout=20)
        started = await started_texts(app, session.id)
    assert turn.output == "did: and the frame" and turn.input.merged == ()
    assert started == ["Paint it red", "and the frame"]
    assert reads(model, "the blue one") == 1 and reads(model, "and the frame") == 1
