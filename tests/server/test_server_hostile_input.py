"""Input the database could not store is refused first, as a problem, on SQLite and Postgres."""

from __future__ import annotations

import httpx2

from .conftest import echo_app, serving

PROBLEM = "application/problem+json"


def refused(response: httpx2.Response, status: int, *words: str) -> dict:
    """The problem a refusal carries, checked to name ``words``."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    assert body["status"] == status
    for word in words:
        assert word in body["detail"], body
    return body


def test_nul_in_ids_text_and_keys_is_a_422_naming_the_field(any_db_url: str, auth: dict) -> None:
    with serving(echo_app(any_db_url)) as base, httpx2.Client(base_url=base, headers=auth) as http:
        session = http.post("/sessions", json={"agent": "echo"}).json()["id"]
        turns = f"/sessions/{session}/turns"
        refused(http.get("/sessions/%00"), 422, "session_id", "U+0000")
        refused(http.get("/sessions/%00/events"), 422, "session_id", "U+0000")
        refused(http.get("/sessions/%00/messages"), 422, "session_id")
        refused(http.get(f"{turns}/a%00b"), 422, "turn_id", "U+0000")
        refused(http.post("/sessions/%00/turns", json={"input": {"text": "hi"}}), 422, "session_id")
        refused(http.post(turns, json={"input": {"text": "a\x00b"}}), 422, "text", "character 1")
        keyed = {"input": {"text": "hi"}, "idempotency_key": "k\x00"}
        refused(http.post(turns, json=keyed), 422, "idempotency_key")
        refused(
            http.post(turns, json={"input": {"text": "hi"}, "answers": "q\x00"}), 422, "answers"
        )
        refused(http.post("/sessions", json={"agent": "echo", "key": "\x00"}), 422, "key")
        assert http.get(f"/sessions/{session}/events").json() == []  # nothing was stored
        # JSON values keep U+0000: they are stored as JSON text, where it is an escape
        payload = {"a\x00": ["b\x00"]}
        receipt = http.post(turns, json={"input": {"payload": payload}}).json()
        turn = http.get(f"{turns}/{receipt['turn_id']}").json()
        assert turn["input"]["payload"] == payload


def test_a_seq_past_the_column_is_refused_before_the_stream_starts(
    any_db_url: str, auth: dict
) -> None:
    with serving(echo_app(any_db_url)) as base, httpx2.Client(base_url=base, headers=auth) as http:
        session = http.post("/sessions", json={"agent": "echo"}).json()["id"]
        events = f"/sessions/{session}/events"
        # a seq column is an INTEGER: 32 bits on Postgres, so that is the bound on both
        for seq in ("99999999999999999999", str(2**31)):
            stream = {"Accept": "text/event-stream", "Last-Event-ID": seq}
            refused(http.get(events, headers=stream), 400, "Last-Event-ID", "2147483647")
        refused(http.get(events, params={"after": 2**31}), 422, "after")
        refused(http.get(events, params={"after": -1}), 422, "after")
        assert http.get(events, params={"after": 2**31 - 1}).json() == []
