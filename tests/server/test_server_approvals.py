"""Approvals over HTTP: the held call in the session's question, ``POST .../approvals``."""

from __future__ import annotations

import time

import httpx2

import turnkit
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

from .conftest import serving
from .test_server_api import assert_problem

TWO_REFUNDS = {
    "role": "assistant",
    "content": [
        {"type": "tool_use", "id": "r1", "name": "refund", "input": {"order_id": "1"}},
        {"type": "tool_use", "id": "r2", "name": "refund", "input": {"order_id": "2"}},
    ],
}


def refund_app(db_url: str, refunded: list[str]) -> App:
    app = App(db_url, fire_schedules=False)

    @turnkit.tool(needs_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        refunded.append(order_id)
        return f"refunded {order_id}"

    @app.agent("support", model=ScriptedModel([TWO_REFUNDS, "Done.", "Noted."]), tools=[refund])
    def support() -> str:
        return "Help."

    return app


def wait_status(http: httpx2.Client, path: str, *wanted: str) -> dict:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        body = http.get(path).json()
        if body["status"] in wanted:
            return body
        time.sleep(0.05)
    raise AssertionError(f"{path} stayed {body['status']}")


def test_approve_over_http_with_every_refusal(db_url: str, auth: dict) -> None:
    refunded: list[str] = []
    app = refund_app(db_url, refunded)
    with serving(app) as base, httpx2.Client(base_url=base, headers=auth) as http:
        sid = http.post("/sessions", json={"agent": "support"}).json()["id"]
        idle = http.post(f"/sessions/{sid}/approvals", json={"decisions": True})
        assert_problem(idle, 409, "no tool calls waiting")

        http.post(f"/sessions/{sid}/turns", json={"input": {"text": "refund 1 and 2"}})
        session = wait_status(http, f"/sessions/{sid}", "awaiting_input")
        question = session["question"]
        assert question["approvals"] == [
            {"call_id": "r1", "tool": "refund", "input": {"order_id": "1"}},
            {"call_id": "r2", "tool": "refund", "input": {"order_id": "2"}},
        ]
        assert [o["value"] for o in question["options"]] == ["approve", "deny"]

        path = f"/sessions/{sid}/approvals"
        unknown = http.post(path, json={"decisions": {"r1": True, "r2": True, "r9": False}})
        assert_problem(unknown, 422, "decisions['r9']", "'r1' (refund)")
        missing = http.post(path, json={"decisions": {"r1": True}})
        assert_problem(missing, 422, "'r2' (refund)")
        edited = http.post(
            path,
            json={"decisions": {"r1": {"approved": True, "input": {"order_id": 7}}, "r2": True}},
        )
        assert_problem(edited, 422, "decisions['r1'].input", "refund")
        denied_with_input = http.post(
            path,
            json={"decisions": {"r1": {"approved": False, "input": {"order_id": "1"}}, "r2": True}},
        )
        assert_problem(denied_with_input, 422, "decisions['r1']", "denial")
        assert_problem(http.post(path, json={"decisions": "yes"}), 422)
        assert_problem(http.post(path, json={"decisions": True, "extra": 1}), 422)
        assert_problem(http.post("/sessions/nope/approvals", json={"decisions": True}), 404)
        assert http.get(f"/sessions/{sid}").json()["status"] == "awaiting_input"
        assert not [
            e for e in http.get(f"/sessions/{sid}/events").json() if e["type"] == "approval.decided"
        ]

        decided = http.post(
            path,
            json={
                "decisions": {"r1": {"approved": True}, "r2": False},
                "reason": "only the first",
            },
        )
        assert decided.status_code == 202, decided.text
        receipt = decided.json()
        turn = wait_status(
            http, f"/sessions/{sid}/turns/{receipt['turn_id']}", "completed", "failed"
        )
        assert turn["output"] == "Done." and turn["input"]["answer"]["value"] == "mixed"
        assert_problem(http.post(path, json={"decisions": True}), 409)
        events = http.get(f"/sessions/{sid}/events").json()
        messages = http.get(f"/sessions/{sid}/messages").json()
    assert refunded == ["1"]
    decisions = [e["data"] for e in events if e["type"] == "approval.decided"]
    assert [(d["call_id"], d["approved"], d["reason"]) for d in decisions] == [
        ("r1", True, "only the first"),
        ("r2", False, "only the first"),
    ]
    results = messages[2]["content"]
    assert results[0]["content"] == "refunded 1"
    assert results[1]["is_error"] and "only the first" in results[1]["content"]
