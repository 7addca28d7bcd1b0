"""Approvals (SPEC section 11): held tool calls, and the decisions that release them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import turnkit
from turnkit import (
    Agent,
    AgentConfig,
    Approval,
    ApprovalRequest,
    Message,
    Tool,
    ToolResultBlock,
    ToolUseBlock,
    tool,
)
from turnkit.errors import InvalidMessageError
from turnkit.testing import ScriptedModel


class Shop:
    """Tools with side effects, counted: what ran, with which input."""

    def __init__(self, needs_approval: Any = True) -> None:
        self.refunds: list[tuple[str, float]] = []
        self.lookups: list[str] = []

        @tool(needs_approval=needs_approval)
        def refund(order_id: str, amount: float) -> str:
            """Refund part of an order."""
            self.refunds.append((order_id, amount))
            return f"refunded {amount:g} on order {order_id}"

        @tool
        def lookup(order_id: str) -> str:
            """Look an order up."""
            self.lookups.append(order_id)
            return f"order {order_id}: paid 50"

        self.tools = [refund, lookup]


def calls(*items: tuple[str, str, dict[str, Any]], text: str = "") -> Message:
    """An assistant message calling tools: (id, name, input) each."""
    blocks: list[Any] = [text] if text else []
    blocks += [ToolUseBlock(i, name, args) for i, name, args in items]
    return Message.assistant(*blocks)


MIXED = calls(
    ("c1", "lookup", {"order_id": "42"}),
    ("c2", "refund", {"order_id": "42", "amount": 20}),
    text="Checking, then refunding.",
)


def shop_agent(replies: list[Any], shop: Shop, **config: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(replies)
    return Agent(AgentConfig("clerk", model=model, tools=shop.tools, **config)), model


def results(message: Message) -> list[ToolResultBlock]:
    return [b for b in message.content if isinstance(b, ToolResultBlock)]


def text(block: Any) -> str:
    assert isinstance(block, ToolResultBlock) and isinstance(block.content, str)
    return block.content


# -- holding ------------------------------------------------------------------------


async def test_a_call_that_needs_approval_stops_the_run_without_running() -> None:
    shop = Shop()
    reply = calls(("c2", "refund", {"order_id": "42", "amount": 20}), text="Refunding.")
    agent, model = shop_agent([reply], shop)
    result = await agent.run("Refund order 42")
    assert result.success is True
    assert result.stop_reason == "approval_required"
    assert result.approvals == (ApprovalRequest("c2", "refund", {"order_id": "42", "amount": 20}),)
    assert result.output == "Refunding."
    assert [m.role for m in result.messages] == ["assistant"]
    assert result.messages[0].content == reply.content
    assert shop.refunds == [] and len(model.requests) == 1


async def test_in_a_mixed_reply_the_calls_without_approval_run_and_the_others_wait() -> None:
    shop = Shop()
    agent, _ = shop_agent([MIXED], shop)
    result = await agent.run("Refund order 42")
    assert result.stop_reason == "approval_required"
    assert [a.call_id for a in result.approvals] == ["c2"]
    reply, answer = result.messages
    assert reply.content == MIXED.content
    assert results(answer) == [ToolResultBlock("c1", "order 42: paid 50")]
    assert shop.lookups == ["42"] and shop.refunds == []


async def test_a_tool_made_with_the_constructor_holds_its_calls_too() -> None:
    ran: list[str] = []
    schema = {"type": "object", "properties": {"order_id": {"type": "string"}}}
    refund = Tool("refund", "Refund.", schema, lambda order_id: ran.append(order_id) or "ok")
    assert refund.needs_approval is False  # the default
    held = Tool("refund", "Refund.", schema, refund.fn, needs_approval=True)
    model = ScriptedModel([calls(("c1", "refund", {"order_id": "1"})), "Refunded."])
    agent = Agent(AgentConfig("clerk", model=model, tools=[held]))
    first = await agent.prompt("Refund order 1")
    assert first.stop_reason == "approval_required" and ran == []
    second = await agent.continue_run(approvals={"c1": True})
    assert second.output == "Refunded." and ran == ["1"]


async def test_approval_requests_read_as_plain_data() -> None:
    request = ApprovalRequest("c2", "refund", {"order_id": "42"})
    assert request.to_dict() == {"call_id": "c2", "tool": "refund", "input": {"order_id": "42"}}
    with pytest.raises(TypeError, match=r"ApprovalRequest\.input"):
        ApprovalRequest("c2", "refund", ["not", "an", "object"])  # type: ignore[arg-type]


async def test_a_sync_function_decides_which_calls_need_approval_on_the_checked_input() -> None:
    seen: list[dict[str, Any]] = []

    def large(input: dict[str, Any]) -> bool:
        seen.append(input)
        return input["amount"] > 100

    shop = Shop(needs_approval=large)
    reply = calls(
        ("small", "refund", {"order_id": "1", "amount": "5"}),  # pydantic coerces "5"
        ("large", "refund", {"order_id": "2", "amount": 500}),
    )
    agent, _ = shop_agent([reply], shop)
    result = await agent.run("Refund both")
    assert [a.call_id for a in result.approvals] == ["large"]
    assert shop.refunds == [("1", 5.0)]
    assert {"order_id": "1", "amount": 5.0} in seen


async def test_an_async_function_decides_too() -> None:
    async def for_order_2(input: dict[str, Any]) -> bool:
        return input["order_id"] == "2"

    shop = Shop(needs_approval=for_order_2)
    reply = calls(
        ("a", "refund", {"order_id": "1", "amount": 1}),
        ("b", "refund", {"order_id": "2", "amount": 1}),
    )
    agent, _ = shop_agent([reply], shop)
    result = await agent.run("Refund both")
    assert [a.call_id for a in result.approvals] == ["b"]
    assert shop.refunds == [("1", 1.0)]


async def test_a_decision_function_that_fails_holds_the_call() -> None:
    shop = Shop(needs_approval=lambda input: input["missing"] > 1)
    agent, _ = shop_agent([calls(("c2", "refund", {"order_id": "1", "amount": 1}))], shop)
    result = await agent.run("Refund")
    assert [a.call_id for a in result.approvals] == ["c2"] and shop.refunds == []


async def test_a_call_with_bad_input_is_not_held_and_the_model_gets_the_error() -> None:
    shop = Shop()
    agent, model = shop_agent([calls(("c2", "refund", {"order_id": "1"})), "Sorry."], shop)
    result = await agent.run("Refund")
    assert result.stop_reason == "end_turn" and result.approvals == ()
    (error,) = results(model.requests[1].messages[-1])
    assert error.is_error and "amount" in text(error)
    assert shop.refunds == []


# -- deciding -----------------------------------------------------------------------


async def test_an_approved_call_runs_once_and_the_model_sees_every_result() -> None:
    shop = Shop()
    agent, model = shop_agent([MIXED, "Refunded 20."], shop)
    first = await agent.run("Refund order 42")
    history = [Message.user("Refund order 42"), *first.messages]
    second = await agent.run(history, approvals={first.approvals[0].call_id: True})
    assert second.success and second.output == "Refunded 20." and second.approvals == ()
    assert shop.refunds == [("42", 20.0)] and shop.lookups == ["42"]
    answer = second.messages[0]
    assert results(answer) == [
        ToolResultBlock("c1", "order 42: paid 50"),
        ToolResultBlock("c2", "refunded 20 on order 42"),
    ]
    assert answer.id == first.messages[-1].id is not None  # it takes the partial one's place
    assert model.requests[1].messages[-1].content == answer.content


async def test_a_denied_call_never_runs_and_the_model_reads_the_reason() -> None:
    shop = Shop()
    agent, model = shop_agent([MIXED, "I could not refund it."], shop)
    first = await agent.run("Refund order 42")
    history = [Message.user("Refund order 42"), *first.messages]
    second = await agent.run(history, approvals={"c2": Approval(False, reason="too much")})
    assert second.success and shop.refunds == []
    denied = model.requests[1].messages[-1].content[1]
    assert isinstance(denied, ToolResultBlock) and denied.is_error
    assert denied.tool_use_id == "c2" and "denied" in text(denied) and "too much" in text(denied)


async def test_an_edited_input_is_what_the_approved_call_runs_with() -> None:
    shop = Shop()
    agent, _ = shop_agent([MIXED, "Refunded 5."], shop)
    first = await agent.run("Refund order 42")
    edited = Approval(True, input={"order_id": "42", "amount": 5})
    await agent.run([Message.user("Refund"), *first.messages], approvals={"c2": edited})
    assert shop.refunds == [("42", 5.0)]


async def test_an_edited_input_that_fails_the_schema_raises_before_anything_runs() -> None:
    shop = Shop()
    hooks: list[str] = []
    agent, model = shop_agent([MIXED, "unused"], shop, before_run=lambda ctx: hooks.append("x"))
    first = await agent.run("Refund order 42")
    history = [Message.user("Refund"), *first.messages]
    bad = Approval(True, input={"order_id": "42", "amount": "lots"})
    with pytest.raises(ValueError, match=r"approvals\['c2'\]\.input.*refund.*amount"):
        await agent.run(history, approvals={"c2": bad})
    assert shop.refunds == [] and len(model.requests) == 1 and hooks == ["x"]


async def test_a_decision_for_an_unknown_call_raises_naming_it() -> None:
    shop = Shop()
    agent, model = shop_agent([MIXED, "unused"], shop)
    first = await agent.run("Refund order 42")
    history = [Message.user("Refund"), *first.messages]
    with pytest.raises(ValueError, match=r"approvals\['c9'\].*waiting: 'c2'"):
        await agent.run(history, approvals={"c2": True, "c9": True})
    with pytest.raises(ValueError, match=r"approvals\['c1'\]"):  # c1 ran: it waits for nothing
        await agent.run(history, approvals={"c1": True, "c2": True})
    assert shop.refunds == [] and len(model.requests) == 1


async def test_a_waiting_call_left_undecided_raises_naming_it() -> None:
    shop = Shop()
    reply = calls(
        ("a", "refund", {"order_id": "1", "amount": 1}),
        ("b", "refund", {"order_id": "2", "amount": 1}),
    )
    agent, model = shop_agent([reply, "unused"], shop)
    first = await agent.run("Refund both")
    with pytest.raises(ValueError, match=r"no decision.*'b' \(refund\)"):
        await agent.run([Message.user("Refund"), *first.messages], approvals={"a": True})
    assert shop.refunds == [] and len(model.requests) == 1


async def test_when_every_call_waits_the_answer_is_new_and_holds_them_all() -> None:
    shop = Shop()
    reply = calls(
        ("a", "refund", {"order_id": "1", "amount": 1}),
        ("b", "refund", {"order_id": "2", "amount": 1}),
    )
    agent, model = shop_agent([reply, "One done."], shop)
    first = await agent.run("Refund both")
    assert [m.role for m in first.messages] == ["assistant"]
    decisions = {"a": True, "b": Approval(False)}
    second = await agent.run([Message.user("Refund"), *first.messages], approvals=decisions)
    assert shop.refunds == [("1", 1.0)]
    answer = second.messages[0]
    assert answer.role == "user" and [b.tool_use_id for b in results(answer)] == ["a", "b"]
    assert model.requests[1].messages[-1].content == answer.content


async def test_without_approvals_waiting_calls_are_answered_as_not_run() -> None:
    shop = Shop()
    agent, model = shop_agent([MIXED, "Nothing refunded."], shop)
    first = await agent.run("Refund order 42")
    second = await agent.run([Message.user("Refund"), *first.messages])
    assert second.success and shop.refunds == []
    c1, c2 = model.requests[1].messages[-1].content
    assert c1 == ToolResultBlock("c1", "order 42: paid 50")
    assert isinstance(c2, ToolResultBlock) and c2.is_error and c2.tool_use_id == "c2"
    assert "interrupted" in text(c2)  # the usual repair of an unanswered call


async def test_approvals_for_a_run_with_nothing_waiting_name_the_call() -> None:
    agent, _ = shop_agent(["unused"], Shop())
    with pytest.raises(ValueError, match=r"approvals\['c1'\].*waiting: none"):
        await agent.run("hello", approvals={"c1": True})


async def test_the_sync_twins_take_approvals() -> None:
    shop = Shop()
    agent, _ = shop_agent([MIXED, "Done."], shop)
    first = agent.run_sync("Refund")
    second = agent.run_sync([Message.user("Refund"), *first.messages], approvals={"c2": True})
    assert second.output == "Done." and shop.refunds == [("42", 20.0)]


# -- history: prompt() and continue_run() -----------------------------------------


async def test_prompt_keeps_a_stopped_run_and_continue_run_completes_it() -> None:
    shop = Shop()
    agent, model = shop_agent([MIXED, "Refunded."], shop)
    first = await agent.prompt("Refund order 42")
    assert first.stop_reason == "approval_required"
    history = agent.get_history()
    assert [m.role for m in history] == ["user", "assistant", "user"]
    assert history[1:] == list(first.messages)
    second = await agent.continue_run(approvals={"c2": True})
    assert second.output == "Refunded."
    history = agent.get_history()
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    assert [b.tool_use_id for b in results(history[2])] == ["c1", "c2"]
    assert shop.refunds == [("42", 20.0)]
    with pytest.raises(ValueError, match=r"approvals\['c2'\].*waiting: none"):
        await agent.continue_run(approvals={"c2": True})  # never twice
    assert shop.refunds == [("42", 20.0)] and len(model.requests) == 2


async def test_a_new_prompt_leaves_waiting_calls_unrun_and_no_longer_waiting() -> None:
    shop = Shop()
    agent, model = shop_agent([MIXED, "Okay, no refund."], shop)
    await agent.prompt("Refund order 42")
    await agent.prompt("Never mind")
    sent = model.requests[1].messages
    assert [b.tool_use_id for b in results(sent[2])] == ["c1", "c2"] and sent[2].content[1].is_error
    with pytest.raises(ValueError, match="waiting: none"):
        await agent.continue_run(approvals={"c2": True})
    assert shop.refunds == []


async def test_a_denial_through_continue_run_is_in_the_history() -> None:
    shop = Shop()
    agent, _ = shop_agent([MIXED, "Not refunded."], shop)
    await agent.prompt("Refund order 42")
    await agent.continue_run(approvals={"c2": Approval(False, reason="over the limit")})
    denied = results(agent.get_history()[2])[1]
    assert denied.is_error and "over the limit" in text(denied) and shop.refunds == []


async def test_bad_decisions_through_continue_run_raise_and_leave_the_history_as_it_was() -> None:
    shop = Shop()
    agent, model = shop_agent([MIXED, "Refunded."], shop)
    await agent.prompt("Refund order 42")
    before = agent.get_history()
    bad = Approval(True, input={"order_id": "42", "amount": "lots"})
    with pytest.raises(ValueError, match=r"approvals\['c2'\]\.input does not fit tool 'refund'"):
        await agent.continue_run(approvals={"c2": bad})
    with pytest.raises(ValueError, match=r"no decision.*'c2' \(refund\)"):
        await agent.continue_run(approvals={})
    with pytest.raises(ValueError, match=r"approvals\['c9'\]"):
        await agent.continue_run(approvals={"c2": True, "c9": False})
    assert agent.get_history() == before and shop.refunds == [] and len(model.requests) == 1
    done = await agent.continue_run(approvals={"c2": True})
    assert done.output == "Refunded." and shop.refunds == [("42", 20.0)]


async def test_a_cancelled_resume_keeps_the_answer_with_the_running_call_interrupted() -> None:
    started = asyncio.Event()

    @tool(needs_approval=True)
    async def deploy(target: str) -> str:
        """Deploy, slowly."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    shop = Shop()
    reply = calls(("c1", "lookup", {"order_id": "42"}), ("d1", "deploy", {"target": "prod"}))
    model = ScriptedModel([reply])
    agent = Agent(AgentConfig("ops", model=model, tools=[*shop.tools, deploy]))
    await agent.prompt("Deploy")
    partial = agent.get_history()[-1]
    task = asyncio.create_task(agent.continue_run(approvals={"d1": True}))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    history = agent.get_history()
    assert [m.role for m in history] == ["user", "assistant", "user"]
    lookup, deployed = results(history[2])
    assert lookup == ToolResultBlock("c1", "order 42: paid 50") and history[2].id == partial.id
    assert deployed.is_error and "interrupted" in text(deployed)


# -- streaming ----------------------------------------------------------------------


async def test_stream_ends_with_approval_required_and_resumes_with_approvals() -> None:
    shop = Shop()
    agent, _ = shop_agent([MIXED, "Refunded."], shop)
    events = [e async for e in agent.stream("Refund order 42")]
    last = events[-1]
    assert last.type == "approval_required" and "done" not in [e.type for e in events]
    assert last.result is not None and last.result.approvals[0].call_id == "c2"
    history = [Message.user("Refund"), *last.result.messages]
    resumed = [e async for e in agent.stream(history, approvals={"c2": True})]
    types = [e.type for e in resumed]
    assert types[:2] == ["tool_result", "message"] and types[-1] == "done"
    assert resumed[0].block == ToolResultBlock("c2", "refunded 20 on order 42")
    assert resumed[-1].result is not None and resumed[-1].result.output == "Refunded."


async def test_stream_checks_approvals_before_it_returns() -> None:
    agent, _ = shop_agent(["unused"], Shop())
    with pytest.raises(ValueError, match="waiting: none"):
        agent.stream("hi", approvals={"c1": False})


# -- bad input ----------------------------------------------------------------------


def test_approval_fields_are_checked_with_errors_naming_them() -> None:
    with pytest.raises(TypeError, match=r"Approval\.approved must be True or False"):
        Approval("yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Approval\.reason must be a string or None"):
        Approval(False, reason=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"Approval\.input must be a JSON object"):
        Approval(True, input=["a"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Approval\.input .*a denial takes none"):
        Approval(False, input={"a": 1})
    with pytest.raises(InvalidMessageError, match=r"Approval\.input\.when"):
        Approval(True, input={"when": object()})
    approval = Approval(True, input={"amount": 5})
    assert approval.input == {"amount": 5}
    with pytest.raises(TypeError):
        approval.input["amount"] = 6  # type: ignore[index]


async def test_approvals_of_the_wrong_shape_raise_naming_the_entry() -> None:
    agent, _ = shop_agent(["unused"], Shop())
    with pytest.raises(TypeError, match=r"approvals must be a dict"):
        await agent.run("hi", approvals=[("c1", True)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"call ids must be strings, got 1"):
        await agent.run("hi", approvals={1: True})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"approvals\['c1'\] must be True, False or an Approval"):
        await agent.run("hi", approvals={"c1": "yes"})  # type: ignore[dict-item]


def test_needs_approval_must_be_a_bool_or_a_function() -> None:
    with pytest.raises(TypeError, match=r"tool 'refund': needs_approval must be"):

        @tool(needs_approval="always")  # type: ignore[call-overload]
        def refund(order_id: str) -> str:
            """Refund."""
            return ""


def test_approval_names_are_exported_from_turnkit() -> None:
    assert turnkit.Approval is Approval and turnkit.ApprovalRequest is ApprovalRequest
    assert {"Approval", "ApprovalRequest"} <= set(turnkit.__all__)


async def test_an_agent_with_a_backend_refuses_approvals_before_any_process_starts() -> None:
    from turnkit.backends import ProcessBackend

    agent = Agent(AgentConfig("ext", backend=ProcessBackend("definitely-not-a-command")))
    with pytest.raises(NotImplementedError, match="approvals: agent 'ext' has an external backend"):
        await agent.run("hi", approvals={})
