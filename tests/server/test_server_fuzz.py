"""Property-based fuzzing of the API from its own ``/openapi.json`` (schemathesis).

Every operation gets generated requests, valid and invalid, on SQLite and on
Postgres; each response must not be a 5xx, must have a documented status and
content type, and must match the documented schema; invalid requests must be
refused. The signed routes (webhooks, Slack, Linear) get whatever body is
generated, signed as their sender signs it, so malformed bodies reach the
handlers past the signature check.

Schemathesis's "schema-valid data is accepted" check is left out: JSON
Schema cannot state every rule an input has (text or payload, integers
within 64 bits, nesting depth), so such a request is rightly a 4xx that
names the rule. "Schema-invalid data is refused" is left out for the
channels: Slack envelopes of other types are acknowledged and ignored, and a
Linear webhook that cannot be read is answered 200 and dropped (Linear
retries anything else).
"""

from __future__ import annotations

import itertools
import json
import time
from datetime import UTC, datetime
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import negative_data_rejection, positive_data_acceptance
from schemathesis.core import NotSet
from schemathesis.generation import GenerationMode
from standardwebhooks.webhooks import Webhook

from channels._support import LINEAR_SECRET, SLACK_SECRET, linear_signed, slack_signed
from fakes.linear import FakeLinear
from fakes.slack import FakeSlack
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

from .conftest import API_KEY, serving

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
WEBHOOK, SLACK, LINEAR = (
    "/webhooks/{webhook_id}",
    "/channels/slack/events",
    "/channels/linear/webhook",
)


def _route(payload: Any) -> str:
    """Route by the payload, as an App might: a session per ``repo``."""
    return f"repo-{payload.get('repo')}" if isinstance(payload, dict) else "other"


def fuzzed_app(db_url: str, slack: FakeSlack, linear: FakeLinear) -> App:
    app = App(db_url, fire_schedules=False)
    app.agent("echo", model=ScriptedModel([lambda r: "ok"] * 5000))(lambda: "Echo.")
    app.webhook("hook", agent="echo", secret=SECRET, session_key=_route)
    app.schedule("daily", "0 6 * * *", "echo", timezone="Europe/Paris", dispatch={"text": "hi"})
    app.slack("echo", SLACK_SECRET, slack.api_key, api_url=slack.api_url)
    app.linear("echo", LINEAR_SECRET, linear.api_key, api_url=linear.api_url)
    return app


class Signer:
    """Signs the generated body of a signed route as its sender would."""

    def __init__(self) -> None:
        self._count = itertools.count()

    def __call__(self, case: schemathesis.Case) -> dict[str, Any]:
        """More arguments for ``call_and_validate``: the signed body and its headers."""
        path = case.operation.path
        if path not in (WEBHOOK, SLACK, LINEAR):
            return {}
        n = next(self._count)
        body = case.body
        if path == WEBHOOK and n % 4:  # mostly the webhook that exists
            case.path_parameters = {**(case.path_parameters or {}), "webhook_id": "hook"}
        if path == LINEAR and isinstance(body, dict):  # mostly fresh, to get past the clock
            stamp = body.get("webhookTimestamp")
            if stamp is None or type(stamp) in (int, float):
                body["webhookTimestamp"] = int(time.time() * 1000)
        if isinstance(body, NotSet | bytes):  # negative cases may send no body, or raw bytes
            raw = b"" if isinstance(body, NotSet) else body
        else:
            raw = json.dumps(body).encode()
        if path == SLACK:
            headers, raw = slack_signed(raw)
        elif path == LINEAR:
            headers, raw = linear_signed(raw)
        else:
            message_id = f"msg_{n % 7}"  # ids come back, with other bodies
            stamp = datetime.fromtimestamp(int(time.time()), UTC)
            headers = {
                "webhook-id": message_id,
                "webhook-timestamp": str(int(stamp.timestamp())),
                "webhook-signature": Webhook(SECRET).sign(
                    message_id, stamp, raw.decode(errors="replace")
                ),
                "Content-Type": "application/json",
            }
        return {"headers": headers, "data": raw}


# every operation, then more bodies for the signed routes alone, where bodies come from
# outside (two tests, so each stays well under 30 s)
@pytest.mark.parametrize("routes", ["every route", "signed routes"])
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_answers_as_documented(
    any_db_url: str, mode: GenerationMode, routes: str
) -> None:
    sign = Signer()
    with FakeSlack() as slack, FakeLinear() as linear:
        app = fuzzed_app(any_db_url, slack, linear)
        with serving(app) as base:
            schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
            if routes == "signed routes":
                schema = schema.include(path_regex="^/(webhooks|channels)/")
            run_schemathesis(schema, mode, sign)


def run_schemathesis(schema: Any, mode: GenerationMode, sign: Signer) -> None:
    @given(case=schema.as_strategy(generation_mode=mode))
    @settings(
        max_examples=300,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def check(case: schemathesis.Case) -> None:
        signed = sign(case)
        excluded = [positive_data_acceptance]
        if case.operation.path in (SLACK, LINEAR):
            excluded.append(negative_data_rejection)
        headers = {"Authorization": f"Bearer {API_KEY}", **signed.pop("headers", {})}
        case.call_and_validate(headers=headers, excluded_checks=excluded, timeout=30, **signed)

    check()
