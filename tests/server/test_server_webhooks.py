"""Webhooks and schedules over HTTP, and ``turnkit worker`` running turns for another process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import httpx2
from standardwebhooks.webhooks import Webhook

from turnkit.cli.serve import load_app
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

from .conftest import serving

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
HERE = Path(__file__).parent


def hooked_app(db_url: str) -> App:
    app = App(db_url, fire_schedules=False)
    app.agent("triage", model=ScriptedModel([lambda r: "ok"] * 20))(lambda: "Triage.")
    app.webhook("ci", agent="triage", secret=SECRET)
    app.schedule("hourly", "0 * * * *", "triage", timezone="Asia/Tokyo", dispatch={"text": "go"})
    return app


def deliver(
    base: str, body: bytes, message_id: str, at: float | None = None, **change: str
) -> httpx2.Response:
    stamp = int(time.time() if at is None else at)
    headers = {
        "webhook-id": message_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": Webhook(SECRET).sign(
            message_id, datetime.fromtimestamp(stamp, UTC), body.decode()
        ),
        "Content-Type": "application/json",
    }
    headers.update(change)
    return httpx2.post(f"{base}/webhooks/ci", content=body, headers=headers)


def test_webhook_deliveries_over_http(db_url: str, auth: dict) -> None:
    body = json.dumps({"build": 12, "status": "red"}).encode()
    with serving(hooked_app(db_url)) as base:
        accepted = deliver(base, body, "msg_a")
        assert accepted.status_code == 202
        out = accepted.json()
        assert out["webhook_id"] == "ci" and out["message_id"] == "msg_a"
        assert out["duplicate"] is False
        replay = deliver(base, body, "msg_a")
        assert replay.status_code == 200 and replay.json()["input_id"] == out["input_id"]
        for response, status in [
            (deliver(base, body, "msg_b", **{"webhook-signature": "v1,AAAA"}), 401),
            (deliver(base, body, "msg_c", at=time.time() - 900), 401),
            (deliver(base, b"[1, 2", "msg_d"), 400),
            (deliver(base, body, "msg_e", **{"Content-Type": "text/plain"}), 415),
            (deliver(base, b'{"a": "' + b"x" * (256 * 1024) + b'"}', "msg_f"), 413),
        ]:
            assert response.status_code == status, response.text
            assert response.headers["content-type"] == "application/problem+json"
        assert "more than 5 minutes" in deliver(base, body, "m", at=time.time() - 900).text
        missing = httpx2.post(f"{base}/webhooks/other", json={"a": 1})
        assert missing.status_code == 404
        with httpx2.Client(base_url=base, headers=auth) as http:
            events = http.get(f"/sessions/{out['session_id']}/events").json()
            inputs = [e for e in events if e["type"] == "input.received"]
            assert len(inputs) == 1 and inputs[0]["data"]["source"] == "webhook"
            turn = http.get(f"/sessions/{out['session_id']}/turns/{out['turn_id']}").json()
            assert turn["input"]["webhook"] == {"id": "ci", "message_id": "msg_a"}
            assert turn["input"]["payload"] == {"build": 12, "status": "red"}
            (schedule,) = http.get("/schedules").json()
            assert schedule["id"] == "hourly" and schedule["overlap"] == "skip"
            assert schedule["next_fire_at"].endswith(":00:00+09:00")
            assert schedule["last_fired_for"] is None


def test_signed_bodies_that_cannot_be_read_are_problems_naming_the_place(db_url: str) -> None:
    with serving(hooked_app(db_url)) as base:
        huge = deliver(base, b'{"n": ' + b"7" * 5000 + b"}", "msg_1")
        deep = deliver(base, b"[" * 100_000 + b"]" * 100_000, "msg_2")
        nan = deliver(base, b'{"n": NaN}', "msg_3")
    assert huge.status_code == 422 and huge.json()["detail"].startswith("body.n: not plain data")
    assert deep.status_code == 400 and "nested too deeply" in deep.json()["detail"]
    assert nan.status_code == 400 and "NaN is not JSON" in nan.json()["detail"]
    for answer in (huge, deep, nan):
        assert answer.headers["content-type"] == "application/problem+json"


def test_turnkit_worker_runs_the_turns_another_process_sends(tmp_path: Path) -> None:
    env = {**os.environ, "WORKER_TEST_DB": f"sqlite:///{tmp_path / 'w.db'}", "ROLE": "worker"}
    command = [sys.executable, "-m", "turnkit", "worker", str(HERE / "worker_app.py")]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().startswith(
            "turnkit worker: running turns of agents echo as executor "
        )
        os.environ["WORKER_TEST_DB"] = env["WORKER_TEST_DB"]
        try:
            client = load_app(f"{HERE / 'worker_app.py'}:app")
        finally:
            del os.environ["WORKER_TEST_DB"]
        with client:
            session = client.create_session_sync("echo")
            receipt = client.send_sync(session.id, "hello")
            turn = client.wait_sync(receipt.turn_id, timeout=60)
        assert turn.status == "completed" and turn.output.startswith("worker says")
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "turnkit worker: stopped" in out
