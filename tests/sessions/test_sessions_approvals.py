"""Approvals in sessions: a tool call that waits for a person's yes (SPEC section 7).

A held call ends the turn with a question listing it; ``app.approve`` or
any answer decides; the approved call runs once, a denied one never.
Each flow runs on SQLite and on Postgres.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import turnkit
from turnkit.errors import (
    InvalidInputError,
    NoApprovalOpenError,
    SessionEndedError,
    SessionNotFoundError,
)
from turnkit.messages import TextBlock, ToolResultBlock
from turnkit.sessions import App
from turnkit.testing import ScriptedModel


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": arguments}


def reply(*calls: dict[str, Any], text: str = "On it.") -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}, *calls]}


REFUND = reply(call("r1", "refund", order_id="42", amount=30.0))


class Refunds:
    """A refund tool behind approval, and a lookup tool that needs none; what ran."""

    def __init__(self) -> None:
        self.refunded: list[tuple[str, float]] = []
        self.looked_up: list[str] = []

        @turnkit.tool(needs_approval=True)
        def refund(order_id: str, amount: float) -> str:
            """Refund an order."""
            self.refunded.append((order_id, amount))
            return f"refunded {amount} on order {order_id}"

        @turnkit.tool(needs_approval=lambda args: args["amount"] > 100)
        def credit(order_id: str, amount: float) -> str:
            """Give store credit (a person approves above 100)."""
            self.refunded.append((f"credit:{order_id}", amount))
            return f"credited {amount}"

        @turnkit.tool
        def lookup(order_id: str) -> str:
            """Look an order up."""
            self.looked_up.append(order_id)
            return f"order {order_id}: delivered"

        self.tools = [refund, credit, lookup]


def refund_app(
    db_url: str, replies: list[Any], ask: bool = False
) -> tuple[App, ScriptedModel, Refunds]:
    app = App(db_url)
    model = ScriptedModel(replies)
    refunds = Refunds()

    @app.agent("support", model=model, tools=refunds.tools)
    def support() -> str:
        if ask:
            turnkit.use_tool("ask")
        return "Help with refunds."

    return app, model, refunds


async def held_turn(app: App, text: str = "Refund order 42") -> tuple[str, Any]:
    session = await app.create_session("support")
    receipt = await app.send(session.id, text=text)
    turn = await app.wait(receipt.turn_id, timeout=10)
    assert turn.status == "completed" and turn.question is not None, turn
    return session.id, turn


async def test_a_held_call_ends_the_turn_with_a_question_and_approve_runs_it_once(
    any_db_url: str,
) -> None:
    app, model, refunds = refund_app(any_db_url, [REFUND, "Refunded 30 on order 42."])
    async with app:
        session_id, turn = await held_turn(app)
        question = turn.question
        assert refunds.refunded == []  # not run before the yes
        assert [(a.call_id, a.tool, dict(a.input)) for a in question.approvals] == [
            ("r1", "refund", {"order_id": "42", "amount": 30.0})
        ]
        assert [(o.label, o.value) for o in question.options] == [
            ("Approve", "approve"),
            ("Deny", "deny"),
        ]
        assert "refund" in question.text and '"order_id": "42"' in question.text
        session = await app.get_session(session_id)
        assert session.status == "awaiting_input" and session.question == question
        asked = [e for e in await app.events(session_id) if e.type == "question.asked"]
        assert asked[0].data["approvals"] == [
            {"call_id": "r1", "tool": "refund", "input": {"order_id": "42", "amount": 30.0}}
        ]
        tool_events = [e for e in await app.events(session_id) if e.type == "tool.started"]
        assert tool_events == []

        receipt = await app.approve(session_id, {"r1": True})
        done = await app.wait(receipt.turn_id, timeout=10)
        assert done.status == "completed" and done.output == "Refunded 30 on order 42."
        assert done.input.answer.question_id == question.id
        assert done.input.answer.value == "approve"
        assert refunds.refunded == [("42", 30.0)]

        history = await app.history(session_id)
        assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
        (result,) = history[2].content
        assert isinstance(result, ToolResultBlock) and result.tool_use_id == "r1"
        assert result.content == "refunded 30.0 on order 42" and not result.is_error
        assert model.requests[1].messages[-1].content[0].tool_use_id == "r1"

        events = await app.events(session_id)
        (decided,) = [e for e in events if e.type == "approval.decided"]
        assert decided.turn_id == receipt.turn_id
        assert decided.data == {
            "call_id": "r1",
            "tool": "refund",
            "approved": True,
            "reason": None,
            "source": "user",
            "user_id": None,
            "input": None,
        }
        assert [e.data["name"] for e in events if e.type == "tool.started"] == ["refund"]
        assert (await app.get_session(session_id)).status == "idle"

        with pytest.raises(NoApprovalOpenError, match="no tool calls waiting"):
            await app.approve(session_id, True)
    assert refunds.refunded == [("42", 30.0)]


async def test_a_denial_gives_the_model_the_reason_and_never_runs_the_tool(
    any_db_url: str,
) -> None:
    app, _model, refunds = refund_app(any_db_url, [REFUND, "I could not refund it."])
    async with app:
        session_id, _ = await held_turn(app)
        receipt = await app.approve(session_id, False, reason="over the limit")
        done = await app.wait(receipt.turn_id, timeout=10)
        assert done.output == "I could not refund it." and done.input.answer.value == "deny"
        history = await app.history(session_id)
        events = await app.events(session_id)
    assert refunds.refunded == []
    (result,) = history[2].content
    assert result.is_error and "denied" in result.content and "over the limit" in result.content
    (decided,) = [e.data for e in events if e.type == "approval.decided"]
    assert decided["approved"] is False and decided["reason"] == "over the limit"
    assert not [e for e in events if e.type == "tool.started"]


async def test_other_calls_of_the_reply_run_and_each_call_is_decided_on_its_own(
    any_db_url: str,
) -> None:
    both = reply(
        call("l1", "lookup", order_id="42"),
        call("r1", "refund", order_id="42", amount=30.0),
        call("c1", "credit", order_id="42", amount=5.0),  # under 100: no approval
        call("c2", "credit", order_id="43", amount=500.0),
    )
    app, model, refunds = refund_app(any_db_url, [both, "Done."])
    async with app:
        session_id, turn = await held_turn(app)
        assert [a.call_id for a in turn.question.approvals] == ["r1", "c2"]
        assert refunds.looked_up == ["42"] and refunds.refunded == [("credit:42", 5.0)]
        history = await app.history(session_id)
        assert [m.role for m in history] == ["user", "assistant"]  # results wait with it

        receipt = await app.approve(
            session_id,
            {"r1": turnkit.Approval(True, input={"order_id": "42", "amount": 25.0}), "c2": False},
            reason="credit too high",
        )
        done = await app.wait(receipt.turn_id, timeout=10)
        assert done.input.answer.value == "mixed"
        assert done.input.payload["decisions"]["r1"]["input"] == {"order_id": "42", "amount": 25.0}
        history = await app.history(session_id)
        events = await app.events(session_id)
    assert refunds.refunded == [("credit:42", 5.0), ("42", 25.0)]  # the edited input
    assert refunds.looked_up == ["42"]  # not run twice
    answer = history[2]
    assert [b.tool_use_id for b in answer.content] == ["l1", "r1", "c1", "c2"]
    assert answer.content[1].content == "refunded 25.0 on order 42"
    assert answer.content[3].is_error and "credit too high" in answer.content[3].content
    decided = [e.data for e in events if e.type == "approval.decided"]
    assert [(d["call_id"], d["approved"]) for d in decided] == [("r1", True), ("c2", False)]
    assert decided[0]["input"] == {"order_id": "42", "amount": 25.0}
    assert model.requests[1].messages[-1] == answer


async def test_any_answer_decides_all_approve_approves_and_other_text_denies(
    any_db_url: str,
) -> None:
    two = reply(
        call("r1", "refund", order_id="1", amount=1.0),
        call("r2", "refund", order_id="2", amount=2.0),
    )
    three = reply(call("r3", "refund", order_id="3", amount=3.0))
    app, _model, refunds = refund_app(any_db_url, [two, "ok", three, "fine"])
    async with app:
        session_id, _ = await held_turn(app)
        receipt = await app.send(session_id, text=" APPROVE ")
        done = await app.wait(receipt.turn_id, timeout=10)
        assert done.input.answer.value == "approve"
        assert sorted(refunds.refunded) == [("1", 1.0), ("2", 2.0)]  # run concurrently

        again = await app.send(session_id, text="refund order 3")
        asked = await app.wait(again.turn_id, timeout=10)
        assert [a.call_id for a in asked.question.approvals] == ["r3"]
        receipt = await app.send(session_id, text="no, check with finance first")
        done = await app.wait(receipt.turn_id, timeout=10)
        assert done.input.answer.value == "deny"
        history = await app.history(session_id)
    assert sorted(refunds.refunded) == [("1", 1.0), ("2", 2.0)]  # run concurrently
    denied = history[-2].content[0]
    assert denied.is_error and "no, check with finance first" in denied.content


async def test_inputs_held_while_waiting_come_as_steering_after_the_results(
    any_db_url: str,
) -> None:
    app, model, _refunds = refund_app(any_db_url, [REFUND, "Done."])
    async with app:
        session_id, _ = await held_turn(app)
        held = await app.send(
            session_id, payload={"order": 42, "status": "returned"}, source="webhook"
        )
        assert held.status == "held"
        receipt = await app.approve(session_id, True)
        done = await app.wait(receipt.turn_id, timeout=10)
        assert [s.source for s in done.input.steering] == ["webhook"]
        history = await app.history(session_id)
    answer = history[2]
    assert isinstance(answer.content[0], ToolResultBlock)
    steering = answer.content[-1]
    assert isinstance(steering, TextBlock) and '"returned"' in steering.text
    assert model.requests[1].messages[-1] == answer


async def test_bad_decisions_store_nothing_and_name_the_call(any_db_url: str) -> None:
    two = reply(
        call("r1", "refund", order_id="1", amount=1.0),
        call("r2", "refund", order_id="2", amount=2.0),
    )
    app, _model, refunds = refund_app(any_db_url, [two, "ok"])
    async with app:
        session = await app.create_session("support")
        with pytest.raises(NoApprovalOpenError):
            await app.approve(session.id, True)
        session_id, _ = await held_turn(app)
        before = await app.events(session_id)
        with pytest.raises(
            InvalidInputError, match=r"decisions\['nope'\].*waiting: 'r1' \(refund\)"
        ):
            await app.approve(session_id, {"r1": True, "r2": True, "nope": True})
        with pytest.raises(InvalidInputError, match=r"none for 'r2' \(refund\)"):
            await app.approve(session_id, {"r1": True})
        with pytest.raises(InvalidInputError, match=r"decisions\['r2'\]\.input.*refund"):
            await app.approve(
                session_id, {"r1": True, "r2": turnkit.Approval(True, input={"order_id": 2})}
            )
        with pytest.raises(InvalidInputError, match=r"decisions\['r1'\]"):
            await app.approve(session_id, {"r1": "yes", "r2": True})
        with pytest.raises(InvalidInputError, match="decisions"):
            await app.approve(session_id, "approve")
        with pytest.raises(InvalidInputError, match="reason"):
            await app.approve(session_id, True, reason=3)
        assert await app.events(session_id) == before  # nothing stored
        assert (await app.get_session(session_id)).status == "awaiting_input"
        receipt = await app.approve(session_id, {"r1": True, "r2": {"approved": False}})
        await app.wait(receipt.turn_id, timeout=10)
    assert refunds.refunded == [("1", 1.0)]


async def test_approve_refuses_an_ask_and_an_ended_session_storing_nothing(
    any_db_url: str,
) -> None:
    asking = reply(call("a1", "ask", question="Which order?"))
    app, _model, refunds = refund_app(any_db_url, [asking], ask=True)
    async with app:
        session_id, turn = await held_turn(app)
        assert turn.question.approvals == () and turn.question.text == "Which order?"
        before = await app.events(session_id)
        with pytest.raises(NoApprovalOpenError, match=f"session {session_id!r} has no tool calls"):
            await app.approve(session_id, True)
        assert isinstance(NoApprovalOpenError(session_id), InvalidInputError)
        assert await app.events(session_id) == before
        assert (await app.get_session(session_id)).status == "awaiting_input"
        await app.end_session(session_id)
        with pytest.raises(SessionEndedError):
            await app.approve(session_id, True)
        with pytest.raises(SessionNotFoundError):
            await app.approve("ses_nope", True)
    assert refunds.refunded == []


def test_approve_sync_decides_from_code_without_an_event_loop(any_db_url: str) -> None:
    app, _model, refunds = refund_app(any_db_url, [REFUND, "Refunded."])
    with app:
        session = app.create_session_sync("support")
        held = app.wait_sync(app.send_sync(session.id, text="Refund 42").turn_id, timeout=10)
        assert [a.call_id for a in held.question.approvals] == ["r1"]
        assert refunds.refunded == []
        receipt = app.approve_sync(session.id, {"r1": True})
        done = app.wait_sync(receipt.turn_id, timeout=10)
    assert done.output == "Refunded." and done.input.answer.value == "approve"
    assert refunds.refunded == [("42", 30.0)]


async def test_a_second_decision_is_a_plain_input_and_runs_nothing_twice(any_db_url: str) -> None:
    app, _model, refunds = refund_app(any_db_url, [REFUND, "Refunded.", "You said approve again."])
    async with app:
        session_id, turn = await held_turn(app)
        first = await app.approve(session_id, True)
        second = await app.send(session_id, text="approve", answers=turn.question.id)
        assert second.turn_id != first.turn_id
        await app.wait(first.turn_id, timeout=10)
        plain = await app.wait(second.turn_id, timeout=10)
        assert plain.input.answer is None and plain.output == "You said approve again."
        events = await app.events(session_id)
    assert refunds.refunded == [("42", 30.0)]
    assert len([e for e in events if e.type == "approval.decided"]) == 1


async def test_a_stale_approve_never_approves_a_call_held_after_it(any_db_url: str) -> None:
    later = reply(call("r2", "refund", order_id="43", amount=900.0))
    app, model, refunds = refund_app(any_db_url, [REFUND, later, "Only 42 was refunded."])
    async with app:
        session_id, turn = await held_turn(app)
        first = await app.approve(session_id, True)
        # a double click, and an "approve" typed at the same time: both before r2 is held
        clicked = await app.send(session_id, text="approve", answers=turn.question.id)
        typed = await app.send(session_id, text="approve")
        asked = await app.wait(first.turn_id, timeout=10)
        assert [a.call_id for a in asked.question.approvals] == ["r2"]
        session = await app.get_session(session_id)
        assert session.status == "awaiting_input" and session.question == asked.question
        assert refunds.refunded == [("42", 30.0)]  # r2 waits: neither stale input approved it
        for stale in (clicked, typed):  # held for the next answer's turn, as for an ask
            held = await app.wait(stale.turn_id, timeout=10)
            assert (held.status, held.reason) == ("cancelled", "held")
        receipt = await app.approve(session_id, False, reason="too much")
        done = await app.wait(receipt.turn_id, timeout=10)
        events = await app.events(session_id)
    assert refunds.refunded == [("42", 30.0)]
    assert [s.text for s in done.input.steering] == ["approve", "approve"]
    decided = [
        (e.data["call_id"], e.data["approved"]) for e in events if e.type == "approval.decided"
    ]
    assert decided == [("r1", True), ("r2", False)]
    denied = model.requests[2].messages[-1].content[0]
    assert denied.tool_use_id == "r2" and denied.is_error and "too much" in denied.content


async def test_an_ask_in_the_same_reply_waits_until_the_calls_are_decided(any_db_url: str) -> None:
    mixed = reply(
        call("a1", "ask", question="Which card?"), call("r1", "refund", order_id="9", amount=9.0)
    )
    app, _model, refunds = refund_app(any_db_url, [mixed, "Which card should I use?"], ask=True)
    async with app:
        session_id, turn = await held_turn(app)
        assert [a.call_id for a in turn.question.approvals] == ["r1"]
        receipt = await app.approve(session_id, True)
        await app.wait(receipt.turn_id, timeout=10)
        history = await app.history(session_id)
    assert refunds.refunded == [("9", 9.0)]
    ask_result, refund_result = history[2].content
    assert ask_result.tool_use_id == "a1" and ask_result.is_error
    assert "not asked" in ask_result.content
    assert refund_result.content == "refunded 9.0 on order 9"


async def test_a_tool_offered_by_the_render_runs_when_approved(any_db_url: str) -> None:
    app = App(any_db_url)
    ran: list[str] = []

    @app.tool(needs_approval=True)
    def wipe(target: str) -> str:
        """Wipe something."""
        ran.append(target)
        return "wiped"

    @app.agent("ops", model=ScriptedModel([reply(call("w1", "wipe", target="cache")), "Wiped."]))
    def ops() -> str:
        turnkit.use_tool("wipe")
        return "Operate."

    async with app:
        session = await app.create_session("ops")
        receipt = await app.send(session.id, text="wipe the cache")
        await app.wait(receipt.turn_id, timeout=10)
        approved = await app.approve(session.id, True)
        done = await app.wait(approved.turn_id, timeout=10)
    assert ran == ["cache"] and done.output == "Wiped."


async def test_an_edited_input_for_a_tool_only_the_render_knows_is_checked_when_the_turn_runs(
    any_db_url: str,
) -> None:
    app = App(any_db_url)
    ran: list[str] = []

    @turnkit.tool(needs_approval=True)
    def wipe(target: str) -> str:
        """Wipe something."""
        ran.append(target)
        return f"wiped {target}"

    wipes = [reply(call(f"w{n}", "wipe", target="cache")) for n in (1, 2)]
    model = ScriptedModel([wipes[0], "That input was refused.", wipes[1], "Wiped the logs."])

    @app.agent("ops", model=model)
    def ops() -> str:
        turnkit.use_tool(wipe)  # a Tool object no name lookup finds: approve cannot check it
        return "Operate."

    async with app:
        session = await app.create_session("ops")
        await app.wait((await app.send(session.id, text="wipe")).turn_id, timeout=10)
        bad = await app.approve(session.id, {"w1": turnkit.Approval(True, input={"target": 5})})
        refused = await app.wait(bad.turn_id, timeout=10)
        await app.wait((await app.send(session.id, text="again")).turn_id, timeout=10)
        edited = turnkit.Approval(True, input={"target": "logs"})
        good = await app.approve(session.id, {"w2": edited})
        done = await app.wait(good.turn_id, timeout=10)
        history = await app.history(session.id)
    assert refused.output == "That input was refused." and done.output == "Wiped the logs."
    assert ran == ["logs"]  # the refused input never ran; the fitting one ran once
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"] * 2
    (error,) = history[2].content  # stored: the model and a later turn see the same
    assert error.tool_use_id == "w1" and error.is_error
    assert "does not fit its schema" in error.content and "did not run" in error.content
    assert model.requests[1].messages[-1] == history[2]
    assert history[6].content[0].content == "wiped logs"


async def test_a_cancel_while_the_approved_call_runs_answers_it_as_interrupted(
    any_db_url: str,
) -> None:
    app = App(any_db_url)
    started = threading.Event()  # set on the loop that runs turns, not this one
    runs: list[str] = []

    @turnkit.tool(needs_approval=True)
    async def deploy(target: str) -> str:
        """Deploy (slow)."""
        runs.append(target)
        started.set()
        await asyncio.Event().wait()
        return "deployed"

    model = ScriptedModel([reply(call("d1", "deploy", target="prod")), "Stopped, as asked."])

    @app.agent("ops", model=model, tools=[deploy])
    def ops() -> str:
        return "Operate."

    async with app:
        session = await app.create_session("ops")
        receipt = await app.send(session.id, text="deploy prod")
        await app.wait(receipt.turn_id, timeout=10)
        approved = await app.approve(session.id, True)
        assert await asyncio.to_thread(started.wait, 10)
        assert await app.cancel(session.id) == approved.turn_id
        cancelled = await app.wait(approved.turn_id, timeout=10)
        history = await app.history(session.id)
        later = await app.send(session.id, text="status?")
        done = await app.wait(later.turn_id, timeout=10)
    assert cancelled.status == "cancelled" and runs == ["prod"]
    assert [m.role for m in history] == ["user", "assistant", "user"]
    (result,) = history[2].content
    assert result.tool_use_id == "d1" and result.is_error and "interrupted" in result.content
    assert done.output == "Stopped, as asked."
    assert [m.role for m in model.requests[1].messages] == ["user", "assistant", "user", "user"]
