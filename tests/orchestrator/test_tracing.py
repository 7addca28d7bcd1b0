"""Tracing: on_trace records and OpenTelemetry gen_ai spans, content-free by default."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from turnkit import AgentConfig, Message, Orchestrator, Task, Team, tool
from turnkit.orchestrator import TraceEvent
from turnkit.testing import ScriptedModel

from ._support import every

PNG_DATA = base64.b64encode(b"\x89PNG\r\n\x1a\n SECRET-PIXELS").decode()
SECRETS = (
    "SECRET-PROMPT",
    "SECRET-SYSTEM",
    "SECRET-THOUGHT",
    "SECRET-ARG",
    "SECRET-ANSWER",
    PNG_DATA,
)


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def scene() -> tuple[AgentConfig, list[dict[str, Any]]]:
    """An agent whose run has a prompt, an image, thinking, a tool call and an answer."""
    first = Message.from_dict(
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "SECRET-THOUGHT", "signature": "sig"},
                {"type": "tool_use", "id": "call1", "name": "lookup", "input": {"q": "SECRET-ARG"}},
            ],
        }
    )
    model = ScriptedModel([first, "SECRET-ANSWER"])
    config = AgentConfig("researcher", model=model, system="SECRET-SYSTEM", tools=[lookup])
    image = {"type": "base64", "media_type": "image/png", "data": PNG_DATA}
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "SECRET-PROMPT"},
                {"type": "image", "source": image},
            ],
        }
    ]
    return config, messages


def leaked(values: list[Any]) -> list[str]:
    text = json.dumps(values, default=str)
    return [secret for secret in SECRETS if secret in text]


async def test_on_trace_gets_nested_spans_with_gen_ai_attributes() -> None:
    traces: list[TraceEvent] = []
    config, messages = scene()
    await Orchestrator(on_trace=traces.append).run_agent(config, messages)
    names = [t.name for t in traces]
    assert names == [
        "chat scripted",
        "execute_tool lookup",
        "chat scripted",
        "invoke_agent researcher",
    ]
    agent = traces[-1]
    assert all(t.parent_id == agent.span_id for t in traces[:-1])
    assert {t.trace_id for t in traces} == {agent.trace_id}
    assert agent.parent_id is None
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "researcher"
    chat = traces[0].attributes
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.request.model"] == "scripted"
    assert chat["gen_ai.provider.name"] == "scripted"
    assert chat["gen_ai.usage.input_tokens"] > 0
    assert chat["gen_ai.usage.output_tokens"] > 0
    assert chat["gen_ai.response.finish_reasons"] == ["tool_use"]
    assert chat["turnkit.request.images"] == 1
    assert chat["turnkit.response.thinking_chars"] == len("SECRET-THOUGHT")
    assert traces[1].attributes["gen_ai.operation.name"] == "execute_tool"
    assert traces[1].attributes["gen_ai.tool.name"] == "lookup"
    assert all(t.end_time >= t.start_time for t in traces)


async def test_traces_carry_no_content_by_default() -> None:
    traces: list[TraceEvent] = []
    config, messages = scene()
    await Orchestrator(on_trace=traces.append).run_agent(config, messages)
    assert leaked([dict(t.attributes) for t in traces]) == []
    assert leaked([t.error for t in traces]) == []


async def test_traces_carry_content_when_asked() -> None:
    traces: list[TraceEvent] = []
    config, messages = scene()
    await Orchestrator(on_trace=traces.append, capture_content=True).run_agent(config, messages)
    assert set(leaked([dict(t.attributes) for t in traces])) == set(SECRETS)
    agent = traces[-1].attributes
    assert json.loads(agent["gen_ai.input.messages"]) == messages
    assert traces[1].attributes["gen_ai.tool.call.arguments"] == '{"q": "SECRET-ARG"}'


async def test_a_trace_callback_gets_its_own_copy_and_may_fail() -> None:
    seen: list[TraceEvent] = []

    def meddle(event: TraceEvent) -> None:
        seen.append(event)
        event.attributes.clear()  # type: ignore[attr-defined]
        raise RuntimeError("trace sink down")

    result = await Orchestrator(ScriptedModel(["ok"]), on_trace=meddle).run_agent(
        AgentConfig("a"), "x"
    )
    assert result.output == "ok"
    assert len(seen) == 2


async def test_team_runs_nest_agent_spans_under_the_run() -> None:
    traces: list[TraceEvent] = []
    team = Team([AgentConfig("w", model=ScriptedModel(every("ok")))])
    await Orchestrator(on_trace=traces.append).run_tasks(team, [Task("A", "x"), Task("B", "y")])
    run = traces[-1]
    assert run.name == "turnkit.run_tasks"
    agents = [t for t in traces if t.name == "invoke_agent w"]
    assert len(agents) == 2
    assert {t.parent_id for t in agents} == {run.span_id}
    assert {t.attributes["turnkit.task"] for t in agents} == {"A", "B"}


async def test_a_failed_run_marks_its_span_failed() -> None:
    traces: list[TraceEvent] = []
    await Orchestrator(ScriptedModel([]), on_trace=traces.append).run_agent(AgentConfig("a"), "x")
    agent = traces[-1]
    assert agent.status == "error"
    assert "ScriptExhaustedError" in (agent.error or "")


async def test_opentelemetry_spans_follow_gen_ai_conventions(otel_spans: Any) -> None:
    from opentelemetry.trace import SpanKind, StatusCode

    config, messages = scene()
    await Orchestrator().run_agent(config, messages)
    spans = otel_spans.get_finished_spans()
    by_name = {span.name: span for span in spans}
    assert set(by_name) == {"chat scripted", "execute_tool lookup", "invoke_agent researcher"}
    agent = by_name["invoke_agent researcher"]
    chats = [span for span in spans if span.name == "chat scripted"]
    assert len(chats) == 2
    assert all(span.parent.span_id == agent.context.span_id for span in chats)
    assert by_name["execute_tool lookup"].parent.span_id == agent.context.span_id
    chat = chats[0]
    assert chat.kind == SpanKind.CLIENT
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "scripted"
    assert chat.attributes["gen_ai.provider.name"] == "scripted"
    assert chat.attributes["gen_ai.usage.input_tokens"] > 0
    assert tuple(chat.attributes["gen_ai.response.finish_reasons"]) == ("tool_use",)
    assert agent.attributes["gen_ai.agent.name"] == "researcher"
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.status.status_code != StatusCode.ERROR
    assert leaked([dict(span.attributes) for span in spans]) == []
    assert leaked([[e.attributes for e in span.events] for span in spans]) == []


async def test_opentelemetry_spans_carry_content_only_when_asked(otel_spans: Any) -> None:
    config, messages = scene()
    await Orchestrator(capture_content=True).run_agent(config, messages)
    spans = otel_spans.get_finished_spans()
    assert set(leaked([dict(span.attributes) for span in spans])) == set(SECRETS)


async def test_opentelemetry_failed_span_has_error_status(otel_spans: Any) -> None:
    from opentelemetry.trace import StatusCode

    await Orchestrator(ScriptedModel([])).run_agent(AgentConfig("a"), "x")
    (agent,) = [s for s in otel_spans.get_finished_spans() if s.name == "invoke_agent a"]
    assert agent.status.status_code == StatusCode.ERROR


def test_tracing_works_without_opentelemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    import turnkit.orchestrator.tracing as tracing

    monkeypatch.setattr(tracing, "_otel_trace", None)  # as if it were not installed
    traces: list[TraceEvent] = []
    orch = Orchestrator(ScriptedModel(["ok"]), on_trace=traces.append)
    assert orch.run_agent_sync(AgentConfig("a"), "x").output == "ok"
    assert [t.name for t in traces] == ["chat scripted", "invoke_agent a"]
