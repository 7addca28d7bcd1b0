"""One session in the inspector: the conversation as a person reads it, acting on
it, a reconnect without duplicates, and a 1,000-message session."""

from __future__ import annotations

import json

from .conftest import ARTIFACTS, CuttableProxy, Served, post_webhook, screenshot, wait_idle


def _open(page: object, served: Served, session_id: str) -> None:
    page.goto(f"{served.base}/ui#/s/{session_id}")
    page.wait_for_selector("#conversation", state="attached")
    page.wait_for_function("() => document.getElementById('connection').dataset.state === 'live'")


def test_ui_shows_text_images_tools_thinking_sources_and_steering(
    served_open: Served, page: object
) -> None:
    with served_open.client() as http:
        sid = http.post("/sessions", json={"agent": "helper", "key": "order-7"}).json()["id"]
        for body in ({"text": "tool please", "payload": {"order": 7}}, {"text": "image"},
                     {"text": "think"}, {"text": "ask me"}):  # fmt: skip
            http.post(f"/sessions/{sid}/turns", json={"input": body})
        wait_idle(http, sid, "awaiting_input")
        assert (
            post_webhook(served_open, {"key": "order-7", "shipped": True}, "w1").status_code == 202
        )
        http.post(f"/sessions/{sid}/turns", json={"input": {"text": "Small"}})
        wait_idle(http, sid)
    _open(page, served_open, sid)
    cards = page.locator("section.input")
    assert cards.count() == 5
    first = cards.nth(0)
    assert first.locator(".badge").inner_text().lower() == "user"
    assert json.loads(first.locator("pre.payload").inner_text()) == {"order": 7}
    call = page.locator(".tool-call", has_text="lookup").first
    assert json.loads(call.locator(".tool-input").inner_text()) == {"order": "7"}
    assert "order 7: shipped" in call.locator(".result").inner_text()
    assert call.locator(".pill").inner_text() == "done"
    image = page.locator("img.image")
    image.scroll_into_view_if_needed()
    page.wait_for_function("() => document.querySelector('img.image').naturalWidth === 80")
    thinking = page.locator("details", has_text="thinking").first
    assert thinking.get_attribute("open") is None  # folded
    assert not page.get_by_text("The user wants a plan.").is_visible()
    thinking.locator("summary").click()
    assert page.get_by_text("The user wants a plan.").is_visible()
    answer = cards.nth(4)
    assert "answers question" in answer.inner_text()
    steering = answer.locator(".held.steering")
    assert steering.locator(".badge").inner_text().lower() == "webhook"
    assert '"shipped": true' in steering.inner_text()
    assert "Noted: Small" in page.inner_text("#conversation")
    screenshot(page, "session")
    assert page.errors == []


def test_ui_answers_a_question_by_clicking_an_option(served_open: Served, page: object) -> None:
    with served_open.client() as http:
        sid = http.post("/sessions", json={"agent": "helper"}).json()["id"]
        http.post(f"/sessions/{sid}/turns", json={"input": {"text": "ask me"}})
        wait_idle(http, sid, "awaiting_input")
        _open(page, served_open, sid)
        assert page.inner_text("#open-question .text") == "Which size?"
        screenshot(page, "question")
        page.click("#open-question button:has-text('Large')")
        page.wait_for_selector("text=Noted: Large")
        page.wait_for_function(
            "() => document.getElementById('session-status').textContent === 'idle'"
        )
        assert page.locator("#open-question").count() == 0
        turns = http.get(f"/sessions/{sid}/events").json()
        answer = [e for e in turns if e["type"] == "turn.started"][-1]["data"]["input"]["answer"]
        assert answer["value"] == "l"
    assert page.errors == []


def test_ui_sends_input_forks_at_a_message_cancels_and_ends(
    served_open: Served, page: object
) -> None:
    page.on("dialog", lambda dialog: dialog.accept())
    with served_open.client() as http:
        sid = http.post("/sessions", json={"agent": "helper"}).json()["id"]
        _open(page, served_open, sid)
        page.fill("#input-text", "hello from the page")
        page.press("#input-text", "Enter")
        page.wait_for_selector("text=echo: hello from the page")
        page.fill("#input-text", "second line")
        page.click("#send")
        page.wait_for_selector("text=echo: second line")
        assert page.locator("article.msg").count() == 4

        page.locator("article.msg[data-index='1'] button.fork").click()  # after the first reply
        page.wait_for_selector("text=fork of")
        forked = page.evaluate("() => location.hash").removeprefix("#/s/")
        assert forked != sid
        assert page.locator("article.msg").count() == 2
        assert "echo: hello from the page" in page.inner_text("#conversation")
        assert "second line" not in page.inner_text("#conversation")
        assert http.get(f"/sessions/{forked}").json()["forked_from"] == {"session_id": sid, "at": 2}

        http.post(f"/sessions/{forked}/turns", json={"input": {"text": "slow"}})  # held half-way
        page.wait_for_selector("#cancel:not([disabled])")
        page.click("#cancel")
        page.wait_for_selector(".event-turn-cancelled")
        assert "turn cancelled" in page.inner_text(".event-turn-cancelled")

        page.click("#end")
        page.wait_for_function(
            "() => document.getElementById('session-status').textContent === 'ended'"
        )
        assert page.locator("#composer").count() == 0
        assert "takes no more input" in page.inner_text("#actions")
        assert http.get(f"/sessions/{forked}").json()["status"] == "ended"
    assert page.errors == []


def test_ui_keeps_what_is_typed_while_a_send_is_in_flight(
    served_open: Served, page: object
) -> None:
    """The reply can arrive over the stream before the send's own response does; the
    next line, typed meanwhile, is not wiped when that response comes."""
    held: list[object] = []
    page.route("**/sessions/*/turns", lambda route: held.append(route))  # held until let go
    with served_open.client() as http:
        sid = http.post("/sessions", json={"agent": "helper"}).json()["id"]
        _open(page, served_open, sid)
        page.fill("#input-text", "first line")
        page.press("#input-text", "Enter")
        for _ in range(500):  # the send reaches the route (10 s at most)
            if held:
                break
            page.wait_for_timeout(20)
        assert held, "the page sent nothing"
        page.fill("#input-text", "typed meanwhile")
        held[0].continue_()  # type: ignore[attr-defined]
        page.unroute("**/sessions/*/turns")
        page.wait_for_selector("text=echo: first line")
        page.wait_for_selector("#send:not([disabled])")
        assert page.input_value("#input-text") == "typed meanwhile"
        page.click("#send")
        page.wait_for_selector("text=echo: typed meanwhile")
        assert page.input_value("#input-text") == ""
    assert page.errors == []


def test_ui_resumes_after_the_network_drops_without_duplicates(
    served_open: Served, proxy: CuttableProxy, page: object
) -> None:
    streams: list[str | None] = []
    page.on(
        "request",
        lambda r: (
            streams.append(r.headers.get("last-event-id")) if "/events?live" in r.url else None
        ),
    )
    with served_open.client() as http:
        sid = http.post("/sessions", json={"agent": "helper"}).json()["id"]
        http.post(f"/sessions/{sid}/turns", json={"input": {"text": "one"}})
        wait_idle(http, sid)
        page.goto(f"{proxy.base}/ui#/s/{sid}")  # through a relay the test can cut
        page.wait_for_selector("text=echo: one")
        page.wait_for_function(
            "() => document.getElementById('connection').dataset.state === 'live'"
        )
        seen = len(http.get(f"/sessions/{sid}/events").json())
        proxy.cut()
        page.wait_for_function(
            "() => document.getElementById('connection').dataset.state === 'reconnecting'"
        )
        for text in ("two", "three"):
            http.post(f"/sessions/{sid}/turns", json={"input": {"text": text}})
        wait_idle(http, sid)
        proxy.down = False
        page.wait_for_selector("text=echo: three")
        page.wait_for_function(
            "() => document.getElementById('connection').dataset.state === 'live'"
        )
        assert page.locator("article.msg").count() == len(
            http.get(f"/sessions/{sid}/messages").json()
        )
        for text in ("echo: one", "echo: two", "echo: three"):
            assert page.locator(".msg .text", has_text=text).count() == 1
        indexes = page.locator("article.msg").evaluate_all("els => els.map(e => e.dataset.index)")
        assert indexes == [str(n) for n in range(6)]
        assert str(seen) in streams[1:], streams  # resumed from the last seq it had
    assert page.errors == []


def test_ui_shows_a_1000_message_session(served_open: Served, page: object) -> None:
    with served_open.client() as http:
        sid = http.post("/sessions", json={"agent": "bulk"}).json()["id"]
        http.post(f"/sessions/{sid}/turns", json={"input": {"text": "go"}})
        wait_idle(http, sid)
        assert len(http.get(f"/sessions/{sid}/messages").json()) == 1000
    page.goto(f"{served_open.base}/ui")
    page.wait_for_selector("tr.session")
    started = page.evaluate("() => performance.now()")
    page.click("tr.session")
    page.wait_for_selector("body[data-messages='1000']")
    painted = page.evaluate(
        "() => new Promise(done => requestAnimationFrame(() => done(performance.now())))"
    )
    shown_ms = int(page.evaluate("() => document.body.dataset.shownMs"))
    fetch_ms = int(page.evaluate("() => document.body.dataset.fetchMs"))
    assert page.locator("article.msg").count() == 1000
    assert "All 499 steps are done." in page.inner_text("article.msg[data-index='999']")
    report = {
        "messages": 1000,
        "fetch_ms": fetch_ms,
        "fetch_and_render_ms": shown_ms,
        "click_to_first_paint_ms": round(painted - started),
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "timing-1000-messages.json").write_text(json.dumps(report, indent=2))
    print(f"\n1,000-message session: {report}")
    screenshot(page, "long-session")
