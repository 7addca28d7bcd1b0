"""``turnkit serve examples/server_app.py`` as a real process, driven over HTTP."""

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

from fakes._replies import Reply
from fakes.openai_chat import FakeOpenAIChat

ROOT = Path(__file__).parents[2]
KEY = "cli-test-key"
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def test_turnkit_serve_runs_an_example_app_over_http(tmp_path: Path) -> None:
    with FakeOpenAIChat(Reply("Your order is on its way."), Reply("Order 7 was shipped.")) as fake:
        env = {
            **os.environ,
            "TURNKIT_MODEL": f"openai:gpt-5@{fake.base_url}/v1",
            "OPENAI_API_KEY": "test",
            "TURNKIT_DATABASE_URL": f"sqlite:///{tmp_path / 'served.db'}",
            "TURNKIT_API_KEY": KEY,
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "turnkit", "serve", "examples/server_app.py", "--port", "0"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            banner = proc.stdout.readline()
            assert banner.startswith("turnkit: serving agents support at http://127.0.0.1:")
            assert "(API key required)" in banner
            base = banner.split(" at ", 1)[1].split()[0]
            drive(base)
        finally:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "turnkit: stopped" in out


def drive(base: str) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    with httpx2.Client(base_url=base, headers=auth, timeout=60) as http:
        health = http.get("/healthz").json()
        assert health["status"] == "ok" and health["runs_turns"] and health["executor_id"]
        assert http.get("/sessions/x", headers={"Authorization": "Bearer no"}).status_code == 401
        sid = http.post("/sessions", json={"agent": "support", "key": "c-1"}).json()["id"]
        receipt = http.post(f"/sessions/{sid}/turns", json={"input": {"text": "Where is it?"}})
        assert receipt.status_code == 202
        turn_id = receipt.json()["turn_id"]
        types = []
        stream_headers = {"Accept": "text/event-stream"}
        with http.stream("GET", f"/sessions/{sid}/events", headers=stream_headers) as events:
            for line in events.iter_lines():
                if line.startswith("event: "):
                    types.append(line.removeprefix("event: "))
                    if types[-1] in ("turn.completed", "turn.failed"):
                        break
        assert types[0] == "input.received" and types[-1] == "turn.completed", types
        turn = http.get(f"/sessions/{sid}/turns/{turn_id}").json()
        assert turn["output"] == "Your order is on its way."

        body = json.dumps({"order": "7", "event": "shipped"}).encode()
        stamp = int(time.time())
        signature = Webhook(SECRET).sign("msg_1", datetime.fromtimestamp(stamp, UTC), body.decode())
        headers = {
            "webhook-id": "msg_1",
            "webhook-timestamp": str(stamp),
            "webhook-signature": signature,
            "Content-Type": "application/json",
        }
        delivered = httpx2.post(f"{base}/webhooks/orders", content=body, headers=headers)
        assert delivered.status_code == 202, delivered.text
        replay = httpx2.post(f"{base}/webhooks/orders", content=body, headers=headers)
        assert replay.status_code == 200 and replay.json()["duplicate"] is True
        order_session = http.get(f"/sessions/{delivered.json()['session_id']}").json()
        assert order_session["key"] == "order-7"

        (schedule,) = http.get("/schedules").json()
        assert schedule["id"] == "nightly-note" and schedule["timezone"] == "Europe/Berlin"
        assert schedule["next_fire_at"].endswith(("T02:30:00+01:00", "T02:30:00+02:00"))
