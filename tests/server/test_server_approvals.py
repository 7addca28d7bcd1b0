"""Approvals over HTTP: the held call in the session's question, ``POST .../approvals``.

Each test runs on SQLite and on Postgres. Waits read the session's event
stream (SSE) until the turn's own ``turn.completed``: no polling.
"""

from __future__ import annotations

import json

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


def refund_app(db_url: str, refunded: list[str], *replies: str) -> App:
    app = App(db_url, fire_schedules=False)

    @turnkit.tool(needs_approval=True)
    def refund(order_id: str) -> str:
        """Refund an order."""
        refunded.append(order_id)
        return f"refunded {order_id}"

    @app.agent("support", model=ScriptedModel([TWO_REFUNDS, *replies]), tools=[refund])
    def support() -> str:
        return "Help."

    return app


def ended_turn(http: httpx2.Client, sid: str, turn_id: str) -> dict:
    """The turn, once the event stream has given its ``turn.*`` end (the stream replays)."""
    ends = ("event: turn.completed", "event: turn.failed", "event: turn.cancelled")
    with http.stream(
        "GET", f"/sessions/{sid}/events", headers={"Accept": "text/event-stream"}
    ) as stream:
        ending = False
        for line in stream.iter_lines():
            if line.startswith("event: "):
                ending = line in ends
            elif ending and line.startswith("data: "):
                ending = False
                if json.loads(line.removeprefix("data: "))["turn_id"] == turn_id:
                    break
    return http.get(f"/sessions/{sid}/turns/{turn_id}").json()


def held_session(http: httpx2.Client) -> tuple[str, dict]:
    """A session whose turn asked about both refunds; its JSON."""
    sid = http.post("/sessions", json={"agent": "support"}).json()["id"]
    posted = http.post(f"/sessions/{sid}/turns", json={"input": {"text": "refund 1 and 2"}})
    turn = ended_turn(http, sid, posted.json()["turn_id"])
    assert turn["status"] == "completed" and turn["question"]["approvals"], turn
    return sid, http.get(f"/sessions/{sid}").json()


def test_approve_over_http_with_every_refusal(any_db_url: str, auth: dict) -> None:
    refunded: list[str] = []
    app = refund_app(any_db_url, refunded, "Done.")
    with serving(app) as base, httpx2.Client(base_url=base, headers=auth) as http:
        idle = http.post("/sessions", json={"agent": "support"}).json()["id"]
        assert_problem(
            http.post(f"/sessions/{idle}/approvals", json={"decisions": True}),
            409,
            "no tool calls waiting",
        )

        sid, session = held_session(http)
        assert session["status"] == "awaiting_input"
        question = session["question"]
        assert question["approvals"] == [
            {"call_id": "r1", "tool": "refund", "input": {"order_id": "1"}},
            {"call_id": "r2", "tool": "refund", "input": {"order_id": "2"}},
        ]
        assert [o["value"] for o in question["options"]] == ["approve", "deny"]
        assert refunded == []

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
                "decisions": {"r1": {"approved": True, "input": {"order_id": "1b"}}, "r2": False},
                "reason": "only the first",
            },
        )
        assert decided.status_code == 202, decided.text
        receipt = decided.json()
        assert receipt["status"] == "queued" and receipt["duplicate"] is False
        turn = ended_turn(http, sid, receipt["turn_id"])
        assert turn["output"] == "Done." and turn["input"]["answer"]["value"] == "mixed"
        assert_problem(http.post(path, json={"decisions": True}), 409)  # decided already
        events = http.get(f"/sessions/{sid}/events").json()
        messages = http.get(f"/sessions/{sid}/messages").json()
    assert refunded == ["1b"]  # the edited input, once
    decisions = [e["data"] for e in events if e["type"] == "approval.decided"]
    assert [(d["call_id"], d["approved"], d["reason"], d["input"]) for d in decisions] == [
        ("r1", True, "only the first", {"order_id": "1b"}),
        ("r2", False, "only the first", None),
    ]
    results = messages[2]["content"]
    assert results[0]["content"] == "refunded 1b"
    assert results[1]["is_error"] and "only the first" in results[1]["content"]


def test_any_answer_posted_as_a_turn_decides_every_waiting_call(
    any_db_url: str, auth: dict
) -> None:
    refunded: list[str] = []
    app = refund_app(any_db_url, refunded, "Nothing refunded.")
    with serving(app) as base, httpx2.Client(base_url=base, headers=auth) as http:
        sid, session = held_session(http)
        posted = http.post(
            f"/sessions/{sid}/turns",
            json={"input": {"text": "not before the audit"}, "answers": session["question"]["id"]},
        )
        assert posted.status_code == 202, posted.text
        turn = ended_turn(http, sid, posted.json()["turn_id"])
        events = http.get(f"/sessions/{sid}/events").json()
        after = http.get(f"/sessions/{sid}").json()
    assert refunded == []
    assert turn["output"] == "Nothing refunded." and turn["input"]["answer"]["value"] == "deny"
    decisions = [e["data"] for e in events if e["type"] == "approval.decided"]
    assert [(d["call_id"], d["approved"], d["reason"]) for d in decisions] == [
        ("r1", False, "not before the audit"),
        ("r2", False, "not before the audit"),
    ]
    assert after["status"] == "idle" and after["question"] is None
