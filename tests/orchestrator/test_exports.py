"""The orchestrator's public names, and `import turnkit` staying cheap."""

from __future__ import annotations

import subprocess
import sys

import turnkit


def test_orchestrator_names_are_exported_from_turnkit() -> None:
    names = (
        "Orchestrator",
        "Team",
        "Task",
        "Budget",
        "OnlineEvaluation",
        "ProgressEvent",
        "TeamResult",
        "TaskResult",
        "TokenBudgetExceededError",
        "CostBudgetExceededError",
    )
    for name in names:
        assert name in turnkit.__all__
        assert getattr(turnkit, name) is not None
    assert issubclass(turnkit.TokenBudgetExceededError, turnkit.TurnkitError)


def test_import_turnkit_loads_no_opentelemetry_and_no_background_machinery() -> None:
    code = (
        "import sys, turnkit\n"
        "lazy = ('opentelemetry', 'turnkit.orchestrator._evaluator',\n"
        "        'turnkit.orchestrator._scheduler', 'turnkit.orchestrator._teams')\n"
        "print(sorted(m for m in sys.modules if m.startswith(lazy)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
