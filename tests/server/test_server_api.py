"""The HTTP API over a real server: every route, and every refusal as problem+json."""

from __future__ import annotations

import json
import socket

import httpx2
import pytest

from turnkit.server import check_bind, is_loopback

from .conftest import API_KEY, echo_app, serving

PROBLEM = "application/problem+json"


def assert_problem(response: httpx2.Response, status: int, *words: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert body["status"] == status and body["title"] and body["type"] == "about:blank"
    for word in words:
        assert word in body["detail"], body
    return body


def test_sessions_turns_messages_and_events_over_http(db_url: str, auth: dict) -> None:
    with serving(echo_app(db_url)) as base, httpx2.Client(base_url=base, headers=auth) as http:
        created = http.post("/sessions", json={"agent": "echo", "key": "t-1", "data": {"n": 1}})
        assert created.status_code == 201
        session = created.json()
        assert session["agent"] == "echo" and session["status"] == "idle"
        assert session["data"] == {"n": 1} and session["key"] == "t-1"
        again = http.post("/sessions", json={"agent": "echo", "key": "t-1"})
        assert again.status_code == 200 and again.json()["id"] == session["id"]
        sid = session["id"]
        posted = http.post(
            f"/sessions/{sid}/turns",
            json={"input": {"text": "Hi", "payload": {"a": [1]}}, "idempotency_key": "k1"},
        )
        assert posted.status_code == 202
        receipt = posted.json()
        assert receipt["status"] == "queued" and receipt["duplicate"] is False
        duplicate = http.post(
            f"/sessions/{sid}/turns", json={"input": {"text": "Hi"}, "idempotency_key": "k1"}
        ).json()
        assert duplicate["duplicate"] is True and duplicate["input_id"] == receipt["input_id"]
        with http.stream(
            "GET", f"/sessions/{sid}/events", headers={"Accept": "text/event-stream"}
        ) as stream:
            for line in stream.iter_lines():
                if line.startswith("event: turn.completed"):
                    break
        turn = http.get(f"/sessions/{sid}/turns/{receipt['turn_id']}").json()
        assert turn["status"] == "completed" and turn["output"].startswith("echo:")
        assert turn["input"]["source"] == "user" and turn["input"]["payload"] == {"a": [1]}
        messages = http.get(f"/sessions/{sid}/messages").json()
        assert [m["role"] for m in messages] == ["user", "assistant"]
        events = http.get(f"/sessions/{sid}/events", params={"after": 1}).json()
        assert [e["seq"] for e in events] == list(range(2, len(events) + 2))
        assert events[-1]["type"] == "turn.completed"
        assert http.post(f"/sessions/{sid}/cancel").json() == {"turn_id": None}
        ended = http.post(f"/sessions/{sid}/end")
        assert ended.status_code == 200 and ended.json()["status"] == "ended"
        health = http.get("/healthz").json()
        assert health == {"status": "ok", "executor_id": health["executor_id"], "runs_turns": True}
        (executor,) = http.get("/executors").json()
        assert executor["id"] == health["executor_id"] and executor["state"] == "live"


def test_the_api_key_guards_everything_but_health_openapi_and_webhooks(db_url: str) -> None:
    with serving(echo_app(db_url)) as base, httpx2.Client(base_url=base) as http:
        for method, path in [
            ("POST", "/sessions"),
            ("GET", "/sessions/ses_x"),
            ("GET", "/sessions/ses_x/events"),
            ("POST", "/sessions/ses_x/turns"),
            ("GET", "/schedules"),
        ]:
            for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": API_KEY}]:
                response = http.request(method, path, headers=headers)
                body = assert_problem(response, 401, "Authorization: Bearer")
                assert response.headers["www-authenticate"] == "Bearer", body
        assert http.get("/healthz").status_code == 200
        assert http.get("/openapi.json").json()["paths"]["/sessions"]
        assert http.post("/webhooks/none", json={}).status_code == 404  # signed, not keyed


def test_refusals_have_the_status_that_fits(db_url: str, auth: dict) -> None:
    with serving(echo_app(db_url)) as base, httpx2.Client(base_url=base, headers=auth) as http:
        sid = http.post("/sessions", json={"agent": "echo"}).json()["id"]
        assert_problem(http.get("/sessions/ses_nope"), 404, "ses_nope")
        assert_problem(http.get(f"/sessions/{sid}/turns/turn_nope"), 404, "turn_nope")
        assert_problem(http.get("/sessions/ses_nope/events"), 404, "ses_nope")
        assert_problem(
            http.get("/sessions/ses_nope/events", headers={"Accept": "text/event-stream"}), 404
        )
        assert_problem(http.post("/sessions", json={"agent": "nobody"}), 422, "nobody")
        assert_problem(http.post("/sessions", json={"agent": "echo", "color": 1}), 422, "color")
        assert_problem(http.post(f"/sessions/{sid}/turns", json={"input": {}}), 422, "text")
        bad = http.post(f"/sessions/{sid}/turns", json={"input": {"text": 5}})
        assert_problem(bad, 422, "input.text")
        assert_problem(http.get(f"/sessions/{sid}/events", params={"after": -1}), 422, "after")
        not_json = http.post(
            "/sessions", content=b"{not json", headers={"Content-Type": "application/json"}
        )
        assert_problem(not_json, 400, "not valid JSON")
        text = http.post("/sessions", content=b"agent=echo", headers={"Content-Type": "text/plain"})
        assert_problem(text, 415, "application/json", "text/plain")
        huge = {"input": {"text": "x" * (2 * 1024 * 1024)}}
        assert_problem(http.post(f"/sessions/{sid}/turns", json=huge), 413, "limit")
        big_payload = {"input": {"payload": "x" * (300 * 1024)}}
        assert_problem(http.post(f"/sessions/{sid}/turns", json=big_payload), 422, "payload")
        assert_problem(
            http.get(
                f"/sessions/{sid}/events",
                headers={"Accept": "text/event-stream", "Last-Event-ID": "abc"},
            ),
            400,
            "Last-Event-ID",
        )
        http.post(f"/sessions/{sid}/end")
        ended = http.post(f"/sessions/{sid}/turns", json={"input": {"text": "late"}})
        assert_problem(ended, 409, "ended")
        assert_problem(http.patch(f"/sessions/{sid}"), 405)


def test_a_body_over_the_limit_is_refused_before_it_is_read_whole(db_url: str, auth: dict) -> None:
    sent = 0

    def chunks():
        nonlocal sent
        for _ in range(64):  # 64 MiB if it were all read
            sent += 1
            yield b"x" * (1024 * 1024)

    with serving(echo_app(db_url)) as base, httpx2.Client(base_url=base, headers=auth) as http:
        sid = http.post("/sessions", json={"agent": "echo"}).json()["id"]
        headers = {"Content-Type": "application/json"}
        try:
            response = http.post(f"/sessions/{sid}/turns", content=chunks(), headers=headers)
        except httpx2.TransportError:
            response = None  # the server closed the connection while we were still sending
        if response is not None:
            assert_problem(response, 413, "limit")
        assert sent < 64
        # a declared length over the limit is refused before any of the body is sent
        host, port = base.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as raw:
            raw.sendall(
                f"POST /sessions/{sid}/turns HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {API_KEY}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {10 * 1024 * 1024}\r\n\r\n".encode()
            )
            head = raw.recv(65536).decode()
        assert head.startswith("HTTP/1.1 413") and PROBLEM in head
        assert json.loads(http.get(f"/sessions/{sid}").text)["status"] == "idle"


def test_without_a_key_only_loopback_may_be_bound() -> None:
    for host in ["127.0.0.1", "::1", "localhost", "127.0.0.2"]:
        assert is_loopback(host)
        check_bind(host, None)
    for host in ["0.0.0.0", "::", "192.168.1.5", "example.com"]:
        assert not is_loopback(host)
        with pytest.raises(ValueError, match=f"refusing to listen on {host} without an API key"):
            check_bind(host, None)
        check_bind(host, "a-key")


def test_openapi_documents_the_data_of_each_event_type(db_url: str) -> None:
    from turnkit.sessions.model.events import EVENT_TYPES

    with serving(echo_app(db_url)) as base:
        document = httpx2.get(f"{base}/openapi.json").json()
    schema = document["components"]["schemas"]["EventOut"]
    assert schema["properties"]["type"]["enum"] == list(EVENT_TYPES)
    shapes = {s["title"]: s for s in schema["properties"]["data"]["anyOf"]}
    asked = shapes["QuestionAsked (question.asked)"]
    assert set(asked["properties"]) == {"question_id", "question", "options", "approvals"}
    assert "is_error" in shapes["ToolFinished (tool.finished)"]["properties"]
