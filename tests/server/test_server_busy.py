"""The turns route takes on_busy (SPEC sections 7 and 8): steer over HTTP, a bad value refused."""

from __future__ import annotations

import threading

import httpx2

import turnkit
from turnkit.sessions import App
from turnkit.testing import ScriptedModel

from .conftest import serving
from .test_server_api import assert_problem

WORK = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "w1", "name": "work", "input": {}}],
}


def test_the_turns_route_steers_a_running_turn_and_refuses_an_unknown_policy(
    db_url: str, auth: dict
) -> None:
    entered, opened = threading.Event(), threading.Event()
    app = App(db_url, fire_schedules=False)
    model = ScriptedModel([WORK, lambda r: f"read: {r.last_text}"])

    @turnkit.tool
    def work() -> str:
        """Wait for the test."""
        entered.set()
        opened.wait(20)
        return "done"

    @app.agent("painter", model=model, tools=[work])
    def painter() -> str:
        return "Paint."

    with serving(app) as base, httpx2.Client(base_url=base, headers=auth) as http:
        sid = http.post("/sessions", json={"agent": "painter"}).json()["id"]
        first = http.post(f"/sessions/{sid}/turns", json={"input": {"text": "red"}}).json()
        assert entered.wait(20)
        bad = http.post(f"/sessions/{sid}/turns", json={"input": {"text": "x"}, "on_busy": "now"})
        assert_problem(bad, 422, "on_busy")
        steer = http.post(
            f"/sessions/{sid}/turns", json={"input": {"text": "blue"}, "on_busy": "steer"}
        )
        assert steer.status_code == 202
        assert steer.json()["status"] == "steered"
        assert steer.json()["turn_id"] == first["turn_id"]
        opened.set()
        with http.stream(
            "GET", f"/sessions/{sid}/events", headers={"Accept": "text/event-stream"}
        ) as stream:
            for line in stream.iter_lines():
                if line.startswith("event: turn.completed"):
                    break
        turn = http.get(f"/sessions/{sid}/turns/{first['turn_id']}").json()
        assert turn["status"] == "completed" and "blue" in turn["output"]
        types = [e["type"] for e in http.get(f"/sessions/{sid}/events").json()]
        assert types.count("input.steered") == 1
