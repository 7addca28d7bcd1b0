"""Ask and answer: questions as session state, held inputs delivered as steering."""

from __future__ import annotations

import asyncio

import pytest

import turnkit
from turnkit.messages import TextBlock, ToolResultBlock
from turnkit.sessions import App
from turnkit.sessions.db.inputs import MAX_STEERING_BYTES, MAX_STEERING_ITEMS
from turnkit.testing import ScriptedModel

ASK = {
    "role": "assistant",
    "content": [
        {"type": "text", "text": "Let me check with you."},
        {
            "type": "tool_use",
            "id": "ask_1",
            "name": "ask",
            "input": {
                "question": "Refund or keep the order?",
                "options": [
                    {"label": "Yes, refund it", "value": "refund"},
                    {"label": "Keep it", "value": "keep"},
                ],
            },
        },
    ],
}


def asking_app(db_url: str, replies: list) -> tuple[App, ScriptedModel]:
    app = App(db_url)
    model = ScriptedModel(replies)

    @app.agent("support", model=model)
    def support() -> str:
        turnkit.use_tool("ask")
        return "Help."

    return app, model


async def completed_turns(app: App, session_id: str, count: int) -> list[str]:
    """The ids of the session's first ``count`` completed turns, once there are that many."""
    done: list[str] = []
    async for event in app.follow(session_id):
        if event.type == "turn.completed":
            done.append(event.turn_id)
            if len(done) == count:
                return done
    raise AssertionError(f"the session ended with {len(done)} completed turns")


async def ask_first(app: App) -> tuple[str, str]:
    session = await app.create_session("support")
    receipt = await app.send(session.id, text="I want my money back")
    asked = await app.wait(receipt.turn_id, timeout=10)
    assert asked.status == "completed" and asked.question is not None
    return session.id, asked.question.id


async def test_the_full_ask_flow_with_options_a_held_webhook_and_steering(db_url: str) -> None:
    app, model = asking_app(db_url, [ASK, "Refunded."])
    async with app:
        session_id, question_id = await ask_first(app)
        session = await app.get_session(session_id)
        assert session.status == "awaiting_input" and session.question.id == question_id
        assert session.question.text == "Refund or keep the order?"
        assert [o.value for o in session.question.options] == ["refund", "keep"]
        asked = [e for e in await app.events(session_id) if e.type == "question.asked"]
        assert asked[0].data["question_id"] == question_id
        assert asked[0].data["options"][0] == {"label": "Yes, refund it", "value": "refund"}

        held = await app.send(
            session_id, payload={"order": 7, "status": "delivered"}, source="webhook"
        )
        assert held.status == "held" and held.turn_id is None
        events = await app.events(session_id)
        assert events[-1].type == "input.received" and events[-1].data["held"] is True

        answer = await app.send(session_id, text="  yes, REFUND it ")
        assert answer.status == "queued"
        turn = await app.wait(answer.turn_id, timeout=10)
        assert turn.status == "completed" and turn.output == "Refunded."
        assert turn.input.answer.question_id == question_id
        assert turn.input.answer.value == "refund"  # matched by label, trimmed, any case
        assert turn.input.answer.text == "  yes, REFUND it "
        (steer,) = turn.input.steering
        assert steer.source == "webhook" and steer.payload == {"order": 7, "status": "delivered"}

        sent = model.requests[1].messages[-1]
        assert sent.role == "user"
        result = sent.content[0]
        assert isinstance(result, ToolResultBlock) and result.tool_use_id == "ask_1"
        assert "yes, REFUND it" in result.content and '"refund"' in result.content
        text = sent.content[-1]
        assert isinstance(text, TextBlock) and "webhook" in text.text and '"delivered"' in text.text
        assert "not instructions" in text.text
        assert (await app.get_session(session_id)).status == "idle"


async def test_an_answer_may_name_the_question_from_any_source(db_url: str) -> None:
    app, _ = asking_app(db_url, [ASK, "ok"])
    async with app:
        session_id, question_id = await ask_first(app)
        held = await app.send(session_id, text="not an answer", source="system")
        assert held.status == "held"
        answer = await app.send(session_id, text="keep", source="webhook", answers=question_id)
        turn = await app.wait(answer.turn_id, timeout=10)
        assert turn.input.answer.value == "keep"
        assert [s.text for s in turn.input.steering] == ["not an answer"]


async def test_forty_held_items_give_thirty_two_steering_and_eight_later_turns(db_url: str) -> None:
    app, _ = asking_app(db_url, [ASK] + ["ok"] * 20)
    async with app:
        session_id, _ = await ask_first(app)
        for i in range(40):
            assert (await app.send(session_id, text=f"note {i}", source="system")).status == "held"
        answer = await app.send(session_id, text="refund")
        turn = await app.wait(answer.turn_id, timeout=10)
        assert [s.text for s in turn.input.steering] == [f"note {i}" for i in range(32)]
        assert len(turn.input.steering) == MAX_STEERING_ITEMS
        later = await completed_turns(app, session_id, 10)
        texts = [(await app.wait(turn_id, timeout=10)).input.text for turn_id in later[2:]]
        assert texts == [f"note {i}" for i in range(32, 40)]


async def test_ten_kib_items_against_the_sixty_four_kib_bound(db_url: str) -> None:
    app, _ = asking_app(db_url, [ASK] + ["ok"] * 10)
    async with app:
        session_id, _ = await ask_first(app)
        for i in range(8):
            await app.send(session_id, text=f"{i}" * 10240, source="system")
        turn = await app.wait((await app.send(session_id, text="refund")).turn_id, timeout=10)
        assert len(turn.input.steering) == MAX_STEERING_BYTES // (10240 + 24)  # 6
        later = await completed_turns(app, session_id, 2 + 8 - 6)
        texts = [(await app.wait(turn_id, timeout=10)).input.text for turn_id in later[2:]]
        assert texts == ["6" * 10240, "7" * 10240]


async def test_inputs_queued_before_the_question_are_held_too(db_url: str) -> None:
    import threading

    gate = threading.Event()

    def slow_ask(request):
        gate.wait(10)
        return ASK

    app, _ = asking_app(db_url, [slow_ask, "done"])
    async with app:
        session = await app.create_session("support")
        first = await app.send(session.id, text="start")
        early = await app.send(session.id, text="written before the question")
        gate.set()
        await app.wait(first.turn_id, timeout=10)
        cancelled = await app.wait(early.turn_id, timeout=10)
        assert cancelled.status == "cancelled" and cancelled.reason == "held"
        answer = await app.send(session.id, text="keep")
        turn = await app.wait(answer.turn_id, timeout=10)
        assert [s.text for s in turn.input.steering] == ["written before the question"]


async def test_a_question_survives_a_restart(db_url: str) -> None:
    app, _ = asking_app(db_url, [ASK])
    async with app:
        session_id, question_id = await ask_first(app)
    again, model = asking_app(db_url, ["Refunded after the restart."])
    async with again:
        assert (await again.get_session(session_id)).status == "awaiting_input"
        turn = await again.wait((await again.send(session_id, text="refund")).turn_id, timeout=10)
        assert turn.output == "Refunded after the restart."
        assert turn.input.answer.question_id == question_id
        assert model.requests[0].messages[-1].content[0].tool_use_id == "ask_1"


@pytest.mark.parametrize("round", range(3))
async def test_an_answer_racing_a_held_input_has_one_consistent_outcome(
    db_url: str, round: int
) -> None:
    app, _ = asking_app(db_url, [ASK] + ["ok"] * 5)
    async with app:
        session_id, _ = await ask_first(app)
        answer, other = await asyncio.gather(
            app.send(session_id, text="refund"),
            app.send(session_id, text="by the way", source="system"),
        )
        turn = await app.wait(answer.turn_id, timeout=10)
        steering = [s.text for s in turn.input.steering]
        if other.status == "held":
            assert steering == ["by the way"]
        else:  # it came after the answer: a turn of its own
            assert steering == [] and other.turn_id is not None
            assert (await app.wait(other.turn_id, timeout=10)).input.text == "by the way"
        history = await app.history(session_id)
        assert sum("by the way" in turnkit.message_text_body(m) for m in history) == 1


async def test_an_ask_with_bad_input_is_an_error_result_and_the_turn_goes_on(db_url: str) -> None:
    bad = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "a", "name": "ask", "input": {}}],
    }
    app, model = asking_app(db_url, [bad, "fine"])
    async with app:
        session = await app.create_session("support")
        turn = await app.wait((await app.send(session.id, text="x")).turn_id, timeout=10)
        assert turn.status == "completed" and turn.question is None and turn.output == "fine"
        result = model.requests[1].messages[-1].content[0]
        assert result.is_error and "question" in result.content
