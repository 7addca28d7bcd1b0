"""Every program in examples/ runs and prints what it promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).parents[2] / "examples"


def run_example(name: str) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_quickstart_shows_the_repaired_history_and_a_refusal() -> None:
    out = run_example("quickstart.py")
    assert "Tool call weather was interrupted before it produced a result." in out
    assert '-> tool_call(weather): {"city": "Paris"}' in out  # the later mutation changed nothing
    assert "refused: messages[0].content: expected a list of content blocks" in out


def test_local_agent_calls_its_tool() -> None:
    out = run_example("local_agent.py")
    assert "<- tool_result(" in out and "): 42" in out
    assert "answer: " in out


def test_support_session_runs_a_durable_turn_and_keeps_its_data() -> None:
    out = run_example("support_session.py")
    lines = out.splitlines()
    kinds = [line.split()[1] for line in lines if line[:2].strip().isdigit()]
    assert kinds[:3] == ["input.received", "turn.started", "message"]
    assert kinds[-1] == "turn.completed"
    assert "status: completed" in out and "answer: " in out
    renders = kinds.count("message") // 2  # the render runs before every model call
    assert f"session data: {{'turns': {renders}}}" in out


def test_approvals_holds_large_refunds_then_runs_the_approved_one_once() -> None:
    out = run_example("approvals.py")
    assert "stop_reason: approval_required | success: True" in out
    assert "waiting: r2 refund({'order_id': '42', 'amount': 250})" in out
    assert "refunded so far: [('7', 20.0)]" in out
    assert "refunded: [('7', 20.0), ('42', 200.0)]" in out
    assert "<- tool_result(r3): The user denied" in out and "over the refund limit" in out


def test_session_approvals_holds_the_refunds_until_decided_and_runs_the_approved_one() -> None:
    out = run_example("session_approvals.py")
    assert "turn: completed | session: awaiting_input" in out
    assert "waiting: r1 refund({'order_id': '42', 'amount': 250})" in out
    assert "refunded so far: []" in out
    assert "answer value: mixed" in out
    assert "refunded: [('42', 200.0)]" in out
    assert "decided: r2 approved=False (over the refund limit)" in out
    assert "<- tool_result(l1): order 42: delivered" in out
    assert "<- tool_result(r2): The user denied" in out
