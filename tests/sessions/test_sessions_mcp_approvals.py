"""An MCP server's tools behind approval in a durable session (SQLite and Postgres).

The server's tools are listed when a turn runs, so ``app.approve`` cannot
check an edited input against their schema: the turn that carries the
decision does, and a refused input gets an error result instead of a run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import turnkit
from turnkit.mcp import MCPServer
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

SERVER = str(Path(__file__).parents[1] / "mcp" / "mcp_test_server.py")


def adds(*calls: tuple[str, int, int]) -> dict[str, Any]:
    content = [
        {"type": "tool_use", "id": i, "name": "add", "input": {"a": a, "b": b}} for i, a, b in calls
    ]
    return {"role": "assistant", "content": content}


async def test_an_mcp_tool_waits_for_approval_and_runs_with_the_checked_edit(
    any_db_url: str,
) -> None:
    asked: list[dict[str, Any]] = []

    def large(input: dict[str, Any]) -> bool:  # a function of the checked input (SPEC 11)
        asked.append(input)
        return input["a"] > 10

    server = MCPServer.stdio(sys.executable, [SERVER], needs_approval=large)
    replies = [
        adds(("m1", 2, 3), ("m2", 50, 1)),
        "Refused.",
        adds(("m3", 70, 1)),
        "Added.",
    ]
    model = ScriptedModel(replies)
    app = App(any_db_url)

    @app.agent("calc", model=model, tools=[server])
    def calc() -> str:
        return "Add numbers."

    async with server, app:
        session = await app.create_session("calc")
        held = await app.wait((await app.send(session.id, text="add")).turn_id, timeout=30)
        assert [(a.call_id, dict(a.input)) for a in held.question.approvals] == [
            ("m2", {"a": 50, "b": 1})
        ]
        bad = turnkit.Approval(True, input={"a": "lots", "b": 1})
        refused = await app.approve(session.id, {"m2": bad})  # accepted: checked when it runs
        await app.wait(refused.turn_id, timeout=30)
        await app.wait((await app.send(session.id, text="again")).turn_id, timeout=30)
        edited = turnkit.Approval(True, input={"a": 7, "b": 1})
        done = await app.wait((await app.approve(session.id, {"m3": edited})).turn_id, timeout=30)
        history = await app.history(session.id)
    assert done.output == "Added."
    assert {"a": 2, "b": 3} in asked and {"a": 50, "b": 1} in asked
    first, second = history[2].content
    assert (first.tool_use_id, first.content) == ("m1", "5")
    assert second.tool_use_id == "m2" and second.is_error
    assert "does not fit its schema" in second.content and "did not run" in second.content
    (third,) = history[6].content
    assert (third.tool_use_id, third.content, third.is_error) == ("m3", "8", False)
