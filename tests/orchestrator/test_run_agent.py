"""run_agent: one-off agents with the default model, validation first, progress events."""

from __future__ import annotations

import base64
import dataclasses
import logging
from typing import Any

import pytest

import turnkit
from turnkit import (
    AgentConfig,
    InvalidMessageError,
    OnlineEvaluation,
    Orchestrator,
    ProgressEvent,
)
from turnkit.testing import ScriptedModel, ScriptedRequest

from ._support import Progress

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n picture").decode()


def image() -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}


async def test_agent_without_model_uses_the_orchestrator_default_model() -> None:
    default = ScriptedModel(["from default"])
    orch = Orchestrator(default)
    result = await orch.run_agent(AgentConfig("helper"), "Hi")
    assert result.output == "from default"
    assert len(default.requests) == 1


async def test_agent_with_its_own_model_ignores_the_default() -> None:
    default, own = ScriptedModel([]), ScriptedModel(["own"])
    result = await Orchestrator(default).run_agent(AgentConfig("helper", model=own), "Hi")
    assert result.output == "own"
    assert default.requests == []


def test_run_agent_sync_returns_the_result() -> None:
    orch = Orchestrator(ScriptedModel(["Paris."]))
    assert orch.run_agent_sync(AgentConfig("geo"), "Capital of France?").output == "Paris."


async def test_string_run_reports_prompt_then_output_usage_and_success() -> None:
    progress = Progress()
    orch = Orchestrator(ScriptedModel(["Paris."]), on_progress=progress)
    await orch.run_agent(AgentConfig("geo"), "Capital of France?")
    start, complete = progress.events
    assert (start.type, start.agent, start.task) == ("agent_start", "geo", None)
    assert start.data == {"prompt": "Capital of France?"}
    assert complete.type == "agent_complete"
    assert complete.data["success"] is True
    assert complete.data["output"] == "Paris."
    assert complete.data["usage"]["input_tokens"] > 0
    assert complete.data["usage"]["output_tokens"] > 0


async def test_structured_run_reports_a_copy_that_neither_callback_nor_caller_can_change() -> None:
    caller = [{"role": "user", "content": [{"type": "text", "text": "Describe"}, image()]}]
    original = [
        {"role": "user", "content": [{"type": "text", "text": "Describe"}, image()]},
    ]
    seen: list[ProgressEvent] = []

    def meddle(event: ProgressEvent) -> None:
        seen.append(event)
        if event.type == "agent_start":
            event.data["messages"][0]["content"][0]["text"] = "CALLBACK WAS HERE"
            event.data["messages"].append({"role": "user", "content": []})
            event.data["extra"] = True

    def reply(request: ScriptedRequest) -> str:
        caller[0]["content"][0]["text"] = "CALLER WAS HERE"  # mid-run
        caller.append({"role": "user", "content": []})
        return request.last_text

    evaluation = OnlineEvaluation([lambda input, result: 1.0], store_payloads="full")
    async with Orchestrator(
        ScriptedModel([reply]), on_progress=meddle, evaluation=evaluation
    ) as orch:
        result = await orch.run_agent(AgentConfig("viewer"), caller)
        await orch.drain(timeout=5)
    assert result.output.startswith("Describe")  # the model saw the input as given
    assert "WAS HERE" not in result.output
    start, complete = seen
    assert start.data["messages"][0]["content"][0]["text"] == "CALLBACK WAS HERE"  # its own copy
    assert "WAS HERE" not in repr(complete.data)
    assert "extra" not in complete.data
    (record,) = evaluation.sink.records  # type: ignore[union-attr]
    assert "WAS HERE" not in (record.input or "")
    assert "Describe" in (record.input or "")
    assert original[0]["content"][1] == image()


async def test_agent_start_messages_are_wire_dicts_not_the_callers_objects() -> None:
    progress = Progress()
    caller = [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]
    await Orchestrator(ScriptedModel(["ok"]), on_progress=progress).run_agent(
        AgentConfig("a"), caller
    )
    data = progress.events[0].data
    assert data == {"messages": caller}
    assert data["messages"] is not caller
    assert data["messages"][0] is not caller[0]


async def test_progress_event_itself_is_frozen() -> None:
    progress = Progress()
    await Orchestrator(ScriptedModel(["ok"]), on_progress=progress).run_agent(AgentConfig("a"), "x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        progress.events[0].type = "error"  # type: ignore[misc]


@pytest.mark.parametrize(
    "bad",
    [
        [{"role": "user", "content": "a bare string"}],
        [{"role": "bot", "content": []}],
        [],
        42,
        [{"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]}],
    ],
)
async def test_invalid_input_raises_before_any_event_evaluation_or_model_call(bad: Any) -> None:
    progress, model = Progress(), ScriptedModel(["never"])
    evaluation = OnlineEvaluation([lambda input, result: 1.0])
    async with Orchestrator(model, on_progress=progress, evaluation=evaluation) as orch:
        with pytest.raises(InvalidMessageError):
            await orch.run_agent(AgentConfig("a"), bad)
        await orch.drain(timeout=5)
        assert orch.evaluation_stats.sampled == 0
        assert orch.evaluation_stats.not_sampled == 0
    assert progress.events == []
    assert model.requests == []
    assert evaluation.sink.records == []  # type: ignore[union-attr]


async def test_async_progress_callback_is_awaited() -> None:
    got: list[str] = []

    async def on_progress(event: ProgressEvent) -> None:
        got.append(event.type)

    await Orchestrator(ScriptedModel(["ok"]), on_progress=on_progress).run_agent(
        AgentConfig("a"), "x"
    )
    assert got == ["agent_start", "agent_complete"]


async def test_a_raising_progress_callback_is_logged_and_the_run_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(event: ProgressEvent) -> None:
        raise RuntimeError("callback bug")

    orch = Orchestrator(ScriptedModel(["fine"]), on_progress=broken)
    with caplog.at_level(logging.ERROR, logger="turnkit.orchestrator"):
        result = await orch.run_agent(AgentConfig("a"), "x")
    assert result.output == "fine"
    assert "on_progress callback failed" in caplog.text


async def test_model_failure_gives_a_failed_result_and_complete_event() -> None:
    def fail(request: ScriptedRequest) -> str:
        raise turnkit.errors.ProviderError("bad request", provider="scripted", status=400)

    progress = Progress()
    result = await Orchestrator(ScriptedModel([fail]), on_progress=progress).run_agent(
        AgentConfig("a"), "x"
    )
    assert not result.success
    complete = progress.of("agent_complete")[0]
    assert complete.data["success"] is False
    assert "bad request" in complete.data["error"]


async def test_hook_error_propagates_after_an_error_event() -> None:
    def before_run(ctx: Any) -> None:
        raise ValueError("hook bug")

    progress = Progress()
    orch = Orchestrator(ScriptedModel(["x"]), on_progress=progress)
    with pytest.raises(ValueError, match="hook bug"):
        await orch.run_agent(AgentConfig("a", before_run=before_run), "x")
    assert progress.types() == ["agent_start", "error"]
    assert progress.events[1].data["type"] == "ValueError"


async def test_tools_still_work_through_the_orchestrator() -> None:
    @turnkit.tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    call = turnkit.Message.assistant(turnkit.ToolUseBlock("c1", "add", {"a": 2, "b": 3}))
    model = ScriptedModel([call, lambda request: request.last_text])
    result = await Orchestrator(model).run_agent(AgentConfig("calc", tools=[add]), "2+3?")
    assert result.success
    assert "5" in result.output


def test_orchestrator_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="max_concurrency"):
        Orchestrator(max_concurrency=0)
    with pytest.raises(TypeError, match="on_progress"):
        Orchestrator(on_progress="print")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="budget"):
        Orchestrator(budget={"max_tokens": 5})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="AgentConfig"):
        Orchestrator().run_agent_sync("helper", "hi")  # type: ignore[arg-type]


async def test_backend_agents_take_text_and_refuse_structured_input_before_anything(
    tmp_path: Any,
) -> None:
    import sys

    from turnkit import backends

    marker = tmp_path / "started"
    script = f"import sys, pathlib; pathlib.Path({str(marker)!r}).touch(); print(sys.stdin.read())"
    config = AgentConfig("echo", backend=backends.ProcessBackend([sys.executable, "-c", script]))
    progress = Progress()
    orch = Orchestrator(on_progress=progress)
    with pytest.raises(InvalidMessageError):
        await orch.run_agent(config, [{"role": "user", "content": [{"type": "text", "text": "x"}]}])
    assert progress.events == []
    assert not marker.exists()  # no process started
    result = await orch.run_agent(config, "hello")
    assert result.output.strip() == "hello"
    assert progress.types() == ["agent_start", "agent_complete"]
