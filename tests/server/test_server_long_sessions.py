"""GET /sessions (newest first, filters, paging) and POST /sessions/{id}/fork over HTTP."""

from __future__ import annotations

import httpx2

from .conftest import echo_app, serving
from .test_server_api import assert_problem


def wait_done(http: httpx2.Client, sid: str, turn_id: str) -> None:
    """Until this turn's own ``turn.completed`` (the stream replays earlier turns' too)."""
    with http.stream(
        "GET", f"/sessions/{sid}/events", headers={"Accept": "text/event-stream"}
    ) as s:
        ending = False
        for line in s.iter_lines():
            if line.startswith("event: "):
                ending = line == "event: turn.completed"
            elif ending and line.startswith("data: ") and f'"turn_id":"{turn_id}"' in line:
                break
    assert http.get(f"/sessions/{sid}/turns/{turn_id}").json()["status"] == "completed"


def test_sessions_are_listed_newest_first_in_pages(db_url: str, auth: dict) -> None:
    with serving(echo_app(db_url)) as base, httpx2.Client(base_url=base, headers=auth) as http:
        created = [http.post("/sessions", json={"agent": "echo"}).json()["id"] for _ in range(7)]
        http.post(f"/sessions/{created[0]}/end")
        pages, before = [], None
        while True:
            params = {"limit": 3} | ({"before": before} if before else {})
            page = http.get("/sessions", params=params).json()
            if not page:
                break
            pages.append([s["id"] for s in page])
            before = page[-1]["id"]
        assert [len(p) for p in pages] == [3, 3, 1]
        assert [sid for p in pages for sid in p] == created[::-1]
        ended = http.get("/sessions", params={"status": "ended", "agent": "echo"}).json()
        assert [s["id"] for s in ended] == [created[0]] and ended[0]["status"] == "ended"
        assert len(http.get("/sessions").json()) == 7  # limit 50 by default
        for params, field in [
            ({"status": "sleeping"}, "status"),
            ({"agent": "nobody"}, "agent"),
            ({"limit": 0}, "limit"),
            ({"limit": "many"}, "limit"),
            ({"before": "ses_missing"}, "before"),
        ]:
            assert_problem(http.get("/sessions", params=params), 422, field)


def test_a_session_says_when_it_was_last_active(db_url: str, auth: dict) -> None:
    from datetime import datetime, timedelta

    with serving(echo_app(db_url)) as base, httpx2.Client(base_url=base, headers=auth) as http:
        created = http.post("/sessions", json={"agent": "echo"}).json()
        assert created["last_activity_at"] == created["created_at"]
        sid = created["id"]
        receipt = http.post(f"/sessions/{sid}/turns", json={"input": {"text": "hi"}}).json()
        wait_done(http, sid, receipt["turn_id"])
        session = http.get(f"/sessions/{sid}").json()
        last_event = http.get(f"/sessions/{sid}/events").json()[-1]
        active = datetime.fromisoformat(session["last_activity_at"])
        assert active == datetime.fromisoformat(last_event["timestamp"])
        assert active > datetime.fromisoformat(session["created_at"])
        assert active.utcoffset() == timedelta(0)
        (listed,) = http.get("/sessions").json()
        assert listed["last_activity_at"] == session["last_activity_at"]
        document = http.get("/openapi.json").json()
    shape = document["components"]["schemas"]["SessionOut"]
    assert "last_activity_at" in shape["required"]
    assert shape["properties"]["last_activity_at"]["format"] == "date-time"


def test_fork_over_http(db_url: str, auth: dict) -> None:
    with serving(echo_app(db_url)) as base, httpx2.Client(base_url=base, headers=auth) as http:
        sid = http.post("/sessions", json={"agent": "echo"}).json()["id"]
        for text in ["one", "two"]:
            receipt = http.post(f"/sessions/{sid}/turns", json={"input": {"text": text}}).json()
            wait_done(http, sid, receipt["turn_id"])
        forked = http.post(f"/sessions/{sid}/fork", json={"at": 2, "key": "b1"})
        assert forked.status_code == 201, forked.text
        fork = forked.json()
        assert fork["forked_from"] == {"session_id": sid, "at": 2} and fork["agent"] == "echo"
        assert [
            m["content"][0]["text"] for m in http.get(f"/sessions/{fork['id']}/messages").json()
        ] == [
            "one",
            "echo:one",
        ]
        again = http.post(f"/sessions/{sid}/fork", json={"at": 2, "key": "b1"})
        assert again.status_code == 200 and again.json()["id"] == fork["id"]
        whole = http.post(f"/sessions/{sid}/fork", json={})
        assert whole.status_code == 201 and whole.json()["forked_from"]["at"] == 4
        assert http.get(f"/sessions/{sid}").json()["forked_from"] is None
        assert_problem(http.post(f"/sessions/{sid}/fork", json={"at": 9}), 422, "at", "4 messages")
        assert_problem(http.post(f"/sessions/{sid}/fork", json={"at": 1, "key": "b1"}), 422, "key")
        assert_problem(http.post(f"/sessions/{sid}/fork", json={"at": -1}), 422, "at")
        assert_problem(http.post(f"/sessions/{sid}/fork", json={"when": 1}), 422, "when")
        assert_problem(http.post("/sessions/ses_missing/fork", json={}), 404, "ses_missing")


def test_openapi_documents_the_session_list_the_fork_and_history_compacted(db_url: str) -> None:
    with serving(echo_app(db_url)) as base:
        document = httpx2.get(f"{base}/openapi.json").json()
    listed = document["paths"]["/sessions"]["get"]
    assert {p["name"] for p in listed["parameters"]} == {"agent", "status", "limit", "before"}
    assert "201" in document["paths"]["/sessions/{session_id}/fork"]["post"]["responses"]
    schemas = document["components"]["schemas"]
    assert "forked_from" in schemas["SessionOut"]["properties"]
    shapes = {s["title"]: s for s in schemas["EventOut"]["properties"]["data"]["anyOf"]}
    compacted = shapes["HistoryCompacted (history.compacted)"]
    assert set(compacted["properties"]) == {"replaced", "tokens_before", "tokens_after"}
