"""MCP servers as tools: the tests' own server over stdio and over loopback HTTP."""

from __future__ import annotations

import base64
import itertools
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from turnkit import Agent, AgentConfig, Approval, Message, Orchestrator, Tool, ToolUseBlock
from turnkit.errors import MCPServerError
from turnkit.mcp import MCPServer
from turnkit.messages import Base64Source, FileBlock, ImageBlock, TextBlock
from turnkit.testing import ScriptedModel

SERVER = str(Path(__file__).with_name("mcp_test_server.py"))


def stdio(**options: Any) -> MCPServer:
    return MCPServer.stdio(sys.executable, [SERVER], **options)


_ids = itertools.count()


def calls(*pairs: tuple[str, dict[str, Any]]) -> Message:
    return Message.assistant(*(ToolUseBlock(f"c{next(_ids)}", name, args) for name, args in pairs))


def server_processes() -> list[int]:
    """Child processes of this test process running the test server (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rpartition(")")[2].split()[1])
        if parent == os.getpid() and SERVER.encode() in cmdline:
            found.append(int(entry.name))
    return found


def results_of(model: ScriptedModel) -> tuple[Any, ...]:
    """The tool results the model was sent in its second request."""
    return model.requests[1].messages[-1].content


async def test_list_tools_gives_turnkit_tools_filtered_and_prefixed() -> None:
    async with stdio() as server:
        tools = await server.list_tools()
        names = [t.name for t in tools]
        assert names == ["add", "chart", "report", "broken", "crash", "echo_upper"]
        assert all(isinstance(t, Tool) for t in tools)
        assert list(tools[0].input_schema["required"]) == ["a", "b"]
        assert await tools[0].fn(a=2, b=40) == "42"
        assert await tools[5].fn(text="hi") == "HI"  # the server still gets "echo.upper"
    async with stdio(include={"add", "echo.upper"}, prefix="calc.") as server:
        assert [t.name for t in await server.list_tools()] == ["calc_add", "calc_echo_upper"]
    async with stdio(include=lambda name: name.startswith("c"), prefix="t_") as server:
        assert [t.name for t in await server.list_tools()] == ["t_chart", "t_crash"]


async def test_agent_calls_mcp_tools_and_gets_text_images_and_files() -> None:
    model = ScriptedModel(
        [calls(("add", {"a": 2, "b": 40}), ("chart", {"title": "Q3"}), ("report", {})), "Done."]
    )
    async with stdio() as server:
        result = await Agent(AgentConfig("a", model=model, tools=[server])).run("Go")
    assert result.success and result.output == "Done."
    assert "add" in model.requests[0].tool_names
    added, chart, report = results_of(model)
    assert added.content == "42" and not added.is_error
    assert chart.content == (
        TextBlock("Chart: Q3"),
        ImageBlock(Base64Source("image/png", "iVBORw0KGgo=")),
    )
    text = base64.b64encode(b"All good.").decode()
    pdf = base64.b64encode(b"%PDF-1.4 tiny").decode()
    assert report.content == (
        FileBlock(Base64Source("text/plain", text), "summary.txt"),
        FileBlock(Base64Source("application/pdf", pdf), "full.pdf"),
    )


async def test_an_error_result_reaches_the_model_as_an_error() -> None:
    model = ScriptedModel([calls(("broken", {})), "Sorry."])
    async with stdio() as server:
        result = await Agent(AgentConfig("a", model=model, tools=[server])).run("Go")
    assert result.success
    (broken,) = results_of(model)
    assert broken.is_error
    assert broken.content.startswith("Tool 'broken' failed: MCPToolError: ")
    assert broken.content.endswith("the database is down")


async def test_a_server_that_dies_mid_call_gives_an_error_result_then_starts_again() -> None:
    model = ScriptedModel([calls(("crash", {})), calls(("add", {"a": 1, "b": 1})), "Recovered."])
    async with stdio() as server:
        result = await Agent(AgentConfig("a", model=model, tools=[server])).run("Go")
    assert result.success and result.output == "Recovered."
    (crashed,) = results_of(model)
    assert crashed.is_error
    assert "MCPServerError" in crashed.content and sys.executable in crashed.content
    assert "crash" in crashed.content
    assert model.requests[2].messages[-1].content[0].content == "2"


@pytest.mark.parametrize(
    "command",
    [
        ["/nonexistent/turnkit-mcp-server"],
        [sys.executable, "-c", "import sys; sys.exit(3)"],
    ],
)
async def test_a_server_that_fails_to_start_fails_the_run_with_a_clear_error(
    command: list[str],
) -> None:
    server = MCPServer.stdio(command[0], command[1:], connect_timeout=20)
    model = ScriptedModel(["never asked"])
    result = await Agent(AgentConfig("a", model=model, tools=[server])).run("Go")
    assert not result.success
    assert isinstance(result.exception, MCPServerError)
    assert result.error is not None and "failed to start" in result.error
    assert command[0] in result.error
    assert model.requests == []  # nothing was sent to the model
    with pytest.raises(MCPServerError, match="failed to start"):
        await server.list_tools()


def test_sync_twins_start_a_connection_per_run_and_end_it_with_the_loop() -> None:
    server = stdio(include={"add"})
    for total in (3, 5):
        model = ScriptedModel([calls(("add", {"a": 1, "b": total - 1})), "ok"])
        agent = Agent(AgentConfig("a", model=model, tools=[server]))
        assert agent.prompt_sync("Go").success
        assert results_of(model)[0].content == str(total)
        assert server_processes() == []  # the run's loop ended its server process


def test_a_tool_name_clash_with_an_mcp_tool_fails_the_run_with_advice() -> None:
    def add(a: int, b: int) -> int:
        return a + b

    agent = Agent(AgentConfig("a", model=ScriptedModel([]), tools=[add, stdio()]))
    result = agent.run_sync("Go")
    assert not result.success
    assert "two tools are named 'add'" in (result.error or "")
    assert "prefix=" in (result.error or "")


async def test_orchestrator_runs_mcp_tools_inside_tool_spans() -> None:
    model = ScriptedModel([calls(("add", {"a": 20, "b": 22})), "42"])
    spans: list[str] = []
    orchestrator = Orchestrator(default_model=model, on_trace=lambda span: spans.append(span.name))
    async with stdio() as server:
        result = await orchestrator.run_agent(AgentConfig("a", tools=[server]), "Go")
    assert result.success and results_of(model)[0].content == "42"
    assert "execute_tool add" in spans


# -- streamable HTTP ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    import uvicorn

    sys.path.insert(0, str(Path(__file__).parent))
    import mcp_test_server

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)  # connections queue until uvicorn accepts them: no start-up wait
    port = sock.getsockname()[1]
    config = uvicorn.Config(mcp_test_server.app(), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(timeout=10)
    sock.close()


async def test_http_server_tools_work_like_stdio_ones(http_url: str) -> None:
    model = ScriptedModel(
        [calls(("web_add", {"a": 2, "b": 3}), ("web_chart", {"title": "x"})), "5"]
    )
    async with MCPServer.http(http_url, prefix="web_") as server:
        agent = Agent(AgentConfig("a", model=model, tools=[server]))
        result = await agent.run("Go")
    assert result.success
    assert model.requests[0].tool_names[:2] == ("web_add", "web_chart")
    added, chart = results_of(model)
    assert added.content == "5"
    assert chart.content[1] == ImageBlock(Base64Source("image/png", "iVBORw0KGgo="))


async def test_an_http_server_that_is_not_there_fails_the_run() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    server = MCPServer.http(f"http://127.0.0.1:{port}/mcp", connect_timeout=20)
    result = await Agent(AgentConfig("a", model=ScriptedModel([]), tools=[server])).run("Go")
    assert not result.success and "failed to start" in (result.error or "")


def test_bad_arguments_are_refused_when_the_server_is_described() -> None:
    with pytest.raises(ValueError, match="non-empty string"):
        MCPServer.stdio("")
    with pytest.raises(TypeError, match="not one string"):
        MCPServer.stdio("python", "server.py")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="http"):
        MCPServer.http("ftp://example.com/mcp")
    with pytest.raises(TypeError, match="needs_approval must be True, False or a function"):
        MCPServer.stdio("python", needs_approval="yes")  # type: ignore[arg-type]


async def test_needs_approval_holds_the_calls_it_names_by_the_servers_own_tool_name() -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def needs_approval(name: str, input: dict[str, Any]) -> bool:
        asked.append((name, input))
        return name == "echo.upper"

    reply = Message.assistant(
        ToolUseBlock("m1", "add", {"a": 2, "b": 40}),
        ToolUseBlock("m2", "echo_upper", {"text": "hi"}),
    )
    model = ScriptedModel([reply, "Done."])
    async with stdio(needs_approval=needs_approval) as server:
        agent = Agent(AgentConfig("a", model=model, tools=[server]))
        first = await agent.run("Go")
        assert first.stop_reason == "approval_required"
        assert [(a.call_id, a.tool) for a in first.approvals] == [("m2", "echo_upper")]
        assert asked == [("add", {"a": 2, "b": 40}), ("echo.upper", {"text": "hi"})]
        history = [Message.user("Go"), *first.messages]
        bad = Approval(True, input={"text": 3})
        with pytest.raises(ValueError, match=r"approvals\['m2'\]\.input does not fit"):
            await agent.run(history, approvals={"m2": bad})  # checked once the tools are listed
        second = await agent.run(history, approvals={"m2": True})
    assert second.output == "Done."
    assert [(b.tool_use_id, b.content) for b in results_of(model)] == [("m1", "42"), ("m2", "HI")]


async def test_needs_approval_of_the_input_alone_works_as_a_tools_does() -> None:
    asked: list[dict[str, Any]] = []

    def needs_approval(input: dict[str, Any]) -> bool:  # SPEC 11: a callable on the checked input
        asked.append(input)
        return input.get("a") == 100

    reply = Message.assistant(
        ToolUseBlock("m1", "add", {"a": 2, "b": 40}), ToolUseBlock("m2", "add", {"a": 100, "b": 1})
    )
    model = ScriptedModel([reply])
    async with stdio(needs_approval=needs_approval) as server:
        result = await Agent(AgentConfig("a", model=model, tools=[server])).run("Go")
    assert result.stop_reason == "approval_required"
    assert [a.call_id for a in result.approvals] == ["m2"]
    assert asked == [{"a": 2, "b": 40}, {"a": 100, "b": 1}]


def test_a_needs_approval_function_that_takes_no_input_is_refused_naming_it() -> None:
    with pytest.raises(
        TypeError, match=r"function of the call's input, or of \(tool name, input\)"
    ):
        MCPServer.stdio("python", needs_approval=lambda: True)
    with pytest.raises(TypeError, match="takes 3 positional arguments"):
        MCPServer.stdio("python", needs_approval=lambda a, b, c: True)


async def test_needs_approval_true_holds_every_tool_of_the_server() -> None:
    model = ScriptedModel([calls(("add", {"a": 1, "b": 1}))])
    async with stdio(needs_approval=True) as server:
        result = await Agent(AgentConfig("a", model=model, tools=[server])).run("Go")
    assert result.stop_reason == "approval_required" and result.approvals[0].tool == "add"
