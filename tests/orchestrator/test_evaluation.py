"""Online evaluation: sampling, payload storage, failing scorers, the bounded queue, sinks."""

from __future__ import annotations

import base64
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from turnkit import AgentConfig, OnlineEvaluation, Orchestrator, RunResult, Task, Team
from turnkit.orchestrator import EvaluationRecord, JsonlSink, MemorySink
from turnkit.orchestrator._payloads import redact_text
from turnkit.testing import ScriptedModel

from ._support import every

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2).decode()


def records(evaluation: OnlineEvaluation) -> list[EvaluationRecord]:
    assert isinstance(evaluation.sink, MemorySink)
    return evaluation.sink.records


async def run_once(evaluation: OnlineEvaluation, input: Any = "Hello", reply: str = "Hi") -> None:
    async with Orchestrator(ScriptedModel([reply]), evaluation=evaluation) as orch:
        await orch.run_agent(AgentConfig("greeter"), input)
        await orch.drain(timeout=5)


async def test_every_run_is_scored_at_sample_one() -> None:
    seen: list[tuple[Any, RunResult]] = []

    def polite(input: Any, result: RunResult) -> tuple[float, str]:
        seen.append((input, result))
        return 0.9, "friendly enough"

    evaluation = OnlineEvaluation([polite], sample=1.0)
    await run_once(evaluation)
    (record,) = records(evaluation)
    assert seen[0][0] == "Hello"
    assert seen[0][1].output == "Hi"
    assert record.agent == "greeter"
    assert record.success is True
    assert record.scores[0].scorer == "polite"
    assert (record.scores[0].score, record.scores[0].reason) == (0.9, "friendly enough")
    assert (record.input, record.output, record.truncated) == (None, None, False)  # "none"


async def test_no_run_is_scored_at_sample_zero() -> None:
    evaluation = OnlineEvaluation([lambda input, result: 1.0], sample=0.0)
    async with Orchestrator(ScriptedModel(every("Hi")), evaluation=evaluation) as orch:
        for _ in range(5):
            await orch.run_agent(AgentConfig("a"), "x")
        await orch.drain(timeout=5)
        assert orch.evaluation_stats.not_sampled == 5
        assert orch.evaluation_stats.sampled == 0
    assert records(evaluation) == []


async def test_structured_runs_give_each_scorer_an_independent_copy() -> None:
    got: list[Any] = []

    def vandal(input: list[dict[str, Any]], result: RunResult) -> bool:
        input[0]["content"][0]["text"] = "VANDALISED"
        input.clear()
        return True

    def reader(input: list[dict[str, Any]], result: RunResult) -> bool:
        got.append(input)
        return True

    evaluation = OnlineEvaluation([vandal, reader], store_payloads="full")
    caller = [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]
    await run_once(evaluation, caller)
    assert got == [[{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]]
    assert got[0] is not caller
    stored = json.loads(records(evaluation)[0].input or "null")
    assert stored == [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]
    assert caller[0]["content"][0]["text"] == "Hello"


async def test_async_scorers_and_bools_are_scores() -> None:
    async def is_short(input: Any, result: RunResult) -> bool:
        return len(result.output) < 10

    evaluation = OnlineEvaluation({"short": is_short, "never": lambda i, r: False})
    await run_once(evaluation)
    scores = {s.scorer: s.score for s in records(evaluation)[0].scores}
    assert scores == {"short": 1.0, "never": 0.0}


async def test_a_failing_scorer_is_recorded_never_raised() -> None:
    def broken(input: Any, result: RunResult) -> float:
        raise RuntimeError("judge offline")

    def odd(input: Any, result: RunResult) -> Any:
        return "great"

    evaluation = OnlineEvaluation([broken, odd, lambda input, result: 1.0])
    async with Orchestrator(ScriptedModel(["Hi"]), evaluation=evaluation) as orch:
        result = await orch.run_agent(AgentConfig("a"), "x")
        await orch.drain(timeout=5)
        assert orch.evaluation_stats.scorer_errors == 2
    assert result.output == "Hi"
    first, second, third = records(evaluation)[0].scores
    assert first.error == "RuntimeError: judge offline" and first.score is None
    assert second.error is not None and "expected a number" in second.error
    assert third.score == 1.0


SECRET_TEXT = (
    "key sk-proj-abcdefghijklmnop1234 mail ada@example.com "
    "Authorization: Bearer eyJhbGciOi.payload.sig password=hunter2 "
    f"inline data:image/png;base64,{PNG}"
)


def secret_input() -> list[dict[str, Any]]:
    image = {"type": "base64", "media_type": "image/png", "data": PNG}
    return [
        {
            "role": "user",
            "content": [{"type": "text", "text": SECRET_TEXT}, {"type": "image", "source": image}],
        }
    ]


@pytest.mark.parametrize(
    "secret",
    ["sk-proj-abcdefghijklmnop1234", "ada@example.com", "eyJhbGciOi", "hunter2", PNG[:40]],
)
async def test_redacted_payloads_mask_secrets_and_binary_data(secret: str) -> None:
    evaluation = OnlineEvaluation([lambda i, r: 1.0], store_payloads="redacted")
    await run_once(evaluation, secret_input(), reply="Write to bob@example.org")
    (record,) = records(evaluation)
    assert secret not in (record.input or "")
    assert "bob@example.org" not in (record.output or "")
    stored = json.loads(record.input or "")
    assert stored[0]["content"][1]["source"]["data"] == f"[BASE64 {len(PNG)}]"
    assert "[REDACTED_KEY]" in stored[0]["content"][0]["text"]
    assert "[EMAIL]" in stored[0]["content"][0]["text"]


async def test_full_payloads_keep_json() -> None:
    evaluation = OnlineEvaluation(
        [lambda i, r: 1.0], store_payloads="full", max_payload_bytes=10**6
    )
    await run_once(evaluation, secret_input())
    (record,) = records(evaluation)
    assert json.loads(record.input or "") == secret_input()
    assert json.loads(record.output or "") == {"text": "Hi", "error": None}
    assert record.truncated is False


@pytest.mark.parametrize("mode", ["full", "redacted"])
async def test_payloads_are_cut_to_max_bytes_with_a_flag(mode: Any) -> None:
    evaluation = OnlineEvaluation([lambda i, r: 1.0], store_payloads=mode, max_payload_bytes=64)
    await run_once(evaluation, "é" * 500)  # two bytes each: the cut must not split one
    (record,) = records(evaluation)
    assert record.truncated is True
    assert len((record.input or "").encode()) <= 64
    assert (record.input or "").startswith('"éé')


async def test_a_full_queue_drops_runs_and_counts_them_without_delaying_any() -> None:
    gate = threading.Event()
    started = threading.Event()

    def slow(input: Any, result: RunResult) -> float:
        started.set()
        assert gate.wait(5)
        return 1.0

    evaluation = OnlineEvaluation([slow], max_concurrent=1, max_queue=1)
    async with Orchestrator(ScriptedModel(every("Hi")), evaluation=evaluation) as orch:
        results = [await orch.run_agent(AgentConfig("a"), f"run {i}") for i in range(5)]
        # All five returned while the first scoring is still blocked.
        assert all(r.output == "Hi" for r in results)
        assert started.wait(5)
        assert records(evaluation) == []
        stats = orch.evaluation_stats
        assert (stats.sampled, stats.dropped) == (2, 3)  # one scoring, one waiting
        gate.set()
        await orch.drain(timeout=5)
        assert orch.evaluation_stats.completed == 2
    assert len(records(evaluation)) == 2


async def test_drain_times_out_when_a_scorer_hangs() -> None:
    gate = threading.Event()
    evaluation = OnlineEvaluation([lambda i, r: gate.wait(5)])
    orch = Orchestrator(ScriptedModel(["Hi"]), evaluation=evaluation)
    await orch.run_agent(AgentConfig("a"), "x")
    with pytest.raises(TimeoutError):
        await orch.drain(timeout=0.05)
    gate.set()
    await orch.aclose(timeout=5)
    assert len(records(evaluation)) == 1


async def test_jsonl_sink_appends_one_record_per_line(tmp_path: Path) -> None:
    path = tmp_path / "evals.jsonl"
    evaluation = OnlineEvaluation([lambda i, r: 0.5], sink=JsonlSink(path), store_payloads="full")
    async with Orchestrator(ScriptedModel(every("Hi")), evaluation=evaluation) as orch:
        await orch.run_agent(AgentConfig("a"), "one")
        await orch.run_agent(AgentConfig("a"), "two")
        await orch.drain(timeout=5)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [json.loads(line["input"]) for line in lines] == ["one", "two"]
    assert lines[0]["scores"] == [
        {"scorer": "<lambda>", "score": 0.5, "reason": None, "error": None}
    ]


async def test_team_runs_are_evaluated_per_task() -> None:
    evaluation = OnlineEvaluation([lambda i, r: 1.0])
    team = Team([AgentConfig("w", model=ScriptedModel(every("ok")))])
    async with Orchestrator(evaluation=evaluation) as orch:
        await orch.run_tasks(team, [Task("A", "x"), Task("B", "y")])
        await orch.drain(timeout=5)
    assert sorted(r.task or "" for r in records(evaluation)) == ["A", "B"]


def test_sync_runs_are_evaluated_too() -> None:
    import asyncio

    evaluation = OnlineEvaluation([lambda i, r: 1.0])
    orch = Orchestrator(ScriptedModel(["Hi"]), evaluation=evaluation)
    orch.run_agent_sync(AgentConfig("a"), "x")  # its event loop is gone after this
    asyncio.run(orch.aclose(timeout=5))
    assert len(records(evaluation)) == 1


def test_evaluation_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="sample"):
        OnlineEvaluation([], sample=1.5)
    with pytest.raises(ValueError, match="store_payloads"):
        OnlineEvaluation([], store_payloads="some")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_concurrent"):
        OnlineEvaluation([], max_concurrent=0)
    with pytest.raises(TypeError, match="not callable"):
        OnlineEvaluation(["score"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="write"):
        OnlineEvaluation([], sink=[])  # type: ignore[arg-type]


@given(
    user=st.from_regex(r"[a-z][a-z0-9._]{0,12}", fullmatch=True),
    host=st.from_regex(r"[a-z][a-z0-9-]{0,10}\.(com|org|io|co\.uk)", fullmatch=True),
    key=st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789_-", min_size=8),
    before=st.text(alphabet=" ,;:\n()[]", max_size=5),
    after=st.text(alphabet=" ,;:\n()[]", max_size=5),
)
def test_redaction_removes_every_email_and_api_key(
    user: str, host: str, key: str, before: str, after: str
) -> None:
    email, api_key = f"{user}@{host}", f"sk-{key}"
    redacted = redact_text(f"{before}{email} {api_key}{after}")
    assert email not in redacted
    assert api_key not in redacted
