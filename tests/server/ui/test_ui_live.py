"""Live tokens and approvals in the inspector.

The stubbed tests feed the page the SPEC's shapes (``text.delta`` & co. without
an ``id:`` line; ``question.asked`` with ``approvals``) through Playwright's
routing, so they hold on this branch today. The real-server tests need the live
stream (#22) and session approvals (#23) on the server.
"""

from __future__ import annotations

import json

from .conftest import Served, screenshot, wait_idle


def _sse(*events: tuple[str, dict[str, object], int | None]) -> str:
    lines = []
    for name, data, seq in events:
        lines.append(f"event: {name}\n" + (f"id: {seq}\n" if seq is not None else ""))
        lines.append(f"data: {json.dumps(data)}\n\n")
    return "".join(lines)


def _delta(sid: str, turn: str, kind: str, index: int, **data: object) -> tuple[str, dict, None]:
    event = {"session_id": sid, "turn_id": turn, "after_seq": 3, "type": kind, "index": index}
    return (kind, {**event, "data": data}, None)


def test_ui_grows_live_deltas_in_place_and_swaps_in_the_durable_message(
    served_open: Served, page: object
) -> None:
    with served_open.client() as http:
        sid = http.post("/sessions", json={"agent": "helper"}).json()["id"]
        http.post(f"/sessions/{sid}/turns", json={"input": {"text": "first"}})
        wait_idle(http, sid)
        known = http.get(f"/sessions/{sid}/events").json()
    seq, turn = known[-1]["seq"], "turn_live"
    started = {**known[1], "seq": seq + 1, "id": seq + 1, "turn_id": turn}
    reply = {"role": "assistant", "content": [{"type": "text", "text": "Hello, world"}]}
    message = {**started, "seq": seq + 2, "id": seq + 2, "type": "message"}
    message["data"] = {"message": {**reply, "invocation_id": turn}}
    first = [
        ("turn.started", started, seq + 1),
        _delta(sid, turn, "thinking.delta", 0, text="Greeting "),
        _delta(sid, turn, "text.delta", 1, text="Hello"),
        _delta(sid, turn, "text.delta", 2, text=","),
    ]
    # after a reconnect the server sends the model call's deltas from its start
    again = [
        _delta(sid, turn, "thinking.delta", 0, text="Greeting "),
        _delta(sid, turn, "text.delta", 1, text="Hello"),
        _delta(sid, turn, "text.delta", 2, text=","),
        _delta(sid, turn, "text.delta", 3, text=" world"),
        _delta(sid, turn, "tool_input.delta", 4, call_id="c9", name="lookup", text='{"order"'),
    ]
    stages = [first, again]
    finish = {"ready": False}
    seen_ids: list[str | None] = []

    def stream(route: object) -> None:
        seen_ids.append(route.request.headers.get("last-event-id"))  # type: ignore[attr-defined]
        if stages:
            body = _sse(*stages.pop(0))
        elif finish["ready"]:
            body = _sse(("message", message, seq + 2))
        else:
            body = ""
        route.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body=body)  # type: ignore[attr-defined]

    page.route("**/events?live=true", stream)
    page.goto(f"{served_open.base}/ui#/s/{sid}")
    page.wait_for_selector("article.msg[data-index='1']")
    page.evaluate(
        "() => { document.querySelector(\"article.msg[data-index='1']\").marked = true; }"
    )
    page.wait_for_function(
        "() => (document.querySelector('.live') || {}).textContent?.includes('world')"
    )
    live = page.locator("article.live")
    assert live.locator(".text").inner_text() == "Hello, world"  # each delta once
    assert live.locator("details.thinking").get_attribute("open") is None  # folded
    assert live.locator("details.thinking pre").text_content() == "Greeting "
    assert live.locator(".tool-call pre").inner_text() == '{"order"'
    # one text node grew: the rows before it are the same nodes, not a re-render
    assert page.evaluate("() => document.querySelector(\"article.msg[data-index='1']\").marked")
    assert page.evaluate("() => document.querySelector('.live .text').childNodes.length") == 1
    screenshot(page, "live-stub")
    finish["ready"] = True
    page.wait_for_selector("article.live", state="detached")
    assert page.locator(".msg .text", has_text="Hello, world").count() == 1
    assert seen_ids[0] == str(seq) and seen_ids[1] == str(seq + 1)
    assert page.errors == []


def test_ui_decides_approvals_with_a_reason_against_the_spec_shapes(
    served_open: Served, page: object
) -> None:
    with served_open.client() as http:
        sid = http.post("/sessions", json={"agent": "helper"}).json()["id"]
        session = http.get(f"/sessions/{sid}").json()
    approvals = [
        {"call_id": "r1", "tool": "refund", "input": {"order": "42", "amount": 9.5}},
        {"call_id": "r2", "tool": "refund", "input": {"order": "43", "amount": 1}},
    ]
    question = {
        "id": "q1",
        "text": "Approve these tool calls?",
        "approvals": approvals,
        "options": [{"label": "Approve", "value": "approve"}, {"label": "Deny", "value": "deny"}],
    }
    asked = {
        "id": 1,
        "seq": 1,
        "session_id": sid,
        "turn_id": "t1",
        "type": "question.asked",
        "timestamp": session["created_at"],
        "data": {
            "question_id": "q1",
            "question": question["text"],
            "options": question["options"],
            "approvals": approvals,
        },
    }
    sent: list[dict] = []

    page.route(
        f"**/sessions/{sid}",
        lambda r: r.fulfill(json={**session, "status": "awaiting_input", "question": question}),
    )
    page.route(f"**/sessions/{sid}/events?after=0*", lambda r: r.fulfill(json=[asked]))
    page.route(
        "**/events?live=true",
        lambda r: r.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body=""),
    )

    def decide(route: object) -> None:
        sent.append(json.loads(route.request.post_data))  # type: ignore[attr-defined]
        route.fulfill(
            status=202,
            json={"input_id": "i", "turn_id": "t2", "status": "queued", "duplicate": False},
        )  # type: ignore[attr-defined]

    page.route(f"**/sessions/{sid}/approvals", decide)
    page.goto(f"{served_open.base}/ui#/s/{sid}")
    page.wait_for_selector("#open-approvals")
    items = page.locator(".approval-item")
    assert items.count() == 2
    assert json.loads(items.nth(0).locator("pre").inner_text()) == {"order": "42", "amount": 9.5}
    screenshot(page, "approvals")
    items.nth(0).locator("button.approve").click()
    assert sent == []  # not until every call is decided
    # The empty live stream closes at once, so the page re-reads the session
    # and redraws: a decision made before a redraw must survive it.
    with page.expect_response(lambda r: r.url.endswith(f"/sessions/{sid}")):
        pass
    page.evaluate("() => new Promise((done) => setTimeout(done, 20))")
    assert items.nth(0).locator(".decision").inner_text() == "approve"
    items.nth(1).locator("input.reason").fill("too small to bother")
    with page.expect_request("**/approvals"):
        items.nth(1).locator("button.deny").click()
    assert sent == [
        {
            "decisions": {
                "r1": {"approved": True},
                "r2": {"approved": False, "reason": "too small to bother"},
            }
        }
    ]
    assert page.errors == []


def test_ui_shows_a_streamed_reply_before_the_turn_completes(
    served_open: Served, page: object
) -> None:
    with served_open.client() as http:
        sid = http.post("/sessions", json={"agent": "helper"}).json()["id"]
        page.goto(f"{served_open.base}/ui#/s/{sid}")
        page.wait_for_function(
            "() => document.getElementById('connection').dataset.state === 'live'"
        )
        http.post(f"/sessions/{sid}/turns", json={"input": {"text": "slow"}})
        # the model holds its stream after four words until the gate file exists
        page.wait_for_selector("article.live >> text=Streaming this reply word", timeout=5000)
        assert http.get(f"/sessions/{sid}").json()["status"] == "running"
        assert "until the gate opens" not in page.inner_text("#conversation")
        screenshot(page, "live")
        served_open.gate.write_text("open")
        page.wait_for_selector("article.live", state="detached")
        page.wait_for_selector(".msg .text >> text=and then it is done.")
        full = "Streaming this reply word by word until the gate opens and then it is done."
        assert page.locator(".msg .text", has_text=full).count() == 1
    assert page.errors == []


def test_ui_approves_and_denies_tool_calls_on_the_server(served_open: Served, page: object) -> None:
    with served_open.client() as http:
        for approve in (True, False):
            sid = http.post("/sessions", json={"agent": "helper"}).json()["id"]
            http.post(f"/sessions/{sid}/turns", json={"input": {"text": "refund"}})
            wait_idle(http, sid, "awaiting_input")
            page.goto(f"{served_open.base}/ui#/s/{sid}")
            item = page.locator(".approval-item")
            item.wait_for()
            assert "refund" in item.inner_text() and '"amount": 9.5' in item.inner_text()
            if approve:
                item.locator("button.approve").click()
                page.wait_for_selector("text=Noted: refunded 9.5 on order 42")
                assert "approved refund" in page.inner_text("#conversation")
            else:
                item.locator("input.reason").fill("not without a receipt")
                item.locator("button.deny").click()
                page.wait_for_selector(".event-approval-decided >> text=denied refund")
                assert "not without a receipt" in page.inner_text("#conversation")
            wait_idle(http, sid)
    assert page.errors == []
