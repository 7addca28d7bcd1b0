"""Property-based fuzzing of the API from its own ``/openapi.json`` (schemathesis).

Every operation gets generated requests, valid and invalid; each response must
not be a 5xx, must have a documented status and content type, and must match
the documented schema; invalid requests must be refused. Schemathesis's
"schema-valid data is accepted" check is left out: JSON Schema cannot state
every rule an input has (text or payload, integers within 64 bits, nesting
depth), so such a request is rightly a 422 that names the rule.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import positive_data_acceptance
from schemathesis.generation import GenerationMode

from turnkit.sessions import App
from turnkit.testing import ScriptedModel

from .conftest import API_KEY, serving

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def fuzzed_app(db_url: str) -> App:
    app = App(db_url, fire_schedules=False)
    app.agent("echo", model=ScriptedModel([lambda r: "ok"] * 5000))(lambda: "Echo.")
    app.webhook("hook", agent="echo", secret=SECRET)
    app.schedule("daily", "0 6 * * *", "echo", timezone="Europe/Paris", dispatch={"text": "hi"})
    return app


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_answers_as_documented(tmp_path: Path, mode: GenerationMode) -> None:
    with serving(fuzzed_app(f"sqlite:///{tmp_path / 'fuzz.db'}")) as base:
        schema = schemathesis.openapi.from_url(f"{base}/openapi.json")

        @given(case=schema.as_strategy(generation_mode=mode))
        @settings(
            max_examples=300,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(
                headers={"Authorization": f"Bearer {API_KEY}"},
                excluded_checks=[positive_data_acceptance],
                timeout=30,
            )

        check()
