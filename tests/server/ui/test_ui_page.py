"""The inspector page in headless Chromium: served open with a strict CSP, the key
prompt, the sessions list, and hostile content shown as text."""

from __future__ import annotations

from datetime import datetime

import httpx2

from .conftest import (
    KEY,
    Served,
    post_webhook,
    screenshot,
    wait_idle,
)
from .ui_constants import HOSTILE


def test_ui_is_served_open_with_a_strict_content_security_policy(served: Served) -> None:
    page = httpx2.get(f"{served.base}/ui", timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    script = httpx2.get(f"{served.base}/ui/static/inspector.js", timeout=10)
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    missing = httpx2.get(f"{served.base}/ui/static/secrets.py", timeout=10)
    assert missing.status_code == 404
    assert httpx2.get(f"{served.base}/sessions", timeout=10).status_code == 401


def test_ui_asks_for_the_key_once_per_tab_and_says_when_it_is_wrong(
    served: Served, page: object, browser: object
) -> None:
    with served.client() as http:
        http.post("/sessions", json={"agent": "helper", "key": "secret-session"})
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url))
    page.goto(served.base + "/ui")
    page.wait_for_selector("#key-form")
    assert page.locator("table.sessions").count() == 0
    assert "secret-session" not in page.content()  # no data without the key
    screenshot(page, "key-prompt")

    page.fill("#api-key", "not-the-key")
    page.click("#key-form button")
    page.wait_for_selector("#key-form .error")
    assert "Wrong key" in page.inner_text("#key-form")
    assert page.locator("table.sessions").count() == 0

    page.fill("#api-key", KEY)
    page.click("#key-form button")
    page.wait_for_selector("tr.session")
    assert page.inner_text("tr.session .key") == "secret-session"

    page.reload()  # same tab: the key is kept, no prompt
    page.wait_for_selector("tr.session")
    assert page.locator("#key-form").count() == 0
    assert all(url.startswith(served.base) for url in asked), asked  # nothing from elsewhere

    other_tab = browser.new_context().new_page()  # another tab asks again
    other_tab.goto(served.base + "/ui")
    other_tab.wait_for_selector("#key-form")
    other_tab.context.close()
    assert page.errors == []


def test_ui_lists_sessions_paged_filtered_and_updating(served_open: Served, page: object) -> None:
    with served_open.client() as http:
        ids = [
            http.post("/sessions", json={"agent": "helper", "key": f"k-{n:02}"}).json()["id"]
            for n in range(27)
        ]
        http.post("/sessions", json={"agent": "bulk", "key": "the-bulk-one"})
        page.goto(served_open.base + "/ui")
        page.wait_for_selector("tr.session")
        rows = page.locator("tr.session")
        assert rows.count() == 25
        assert rows.first.inner_text().startswith("bulk")  # newest first
        assert page.locator("table.sessions th").nth(3).inner_text() == "last activity"
        newest = http.get("/sessions", params={"limit": 1}).json()[0]
        activity = rows.first.locator("td.activity")
        assert activity.get_attribute("data-at") == newest["last_activity_at"]
        assert activity.inner_text() == "just now"
        screenshot(page, "sessions")

        page.click("#older")
        page.wait_for_function("document.querySelectorAll('tr.session').length === 3")
        assert page.locator("tr.session .key").all_inner_texts() == ["k-02", "k-01", "k-00"]
        page.click("#newer")
        page.wait_for_function("document.querySelectorAll('tr.session').length === 25")

        page.select_option("#filter-agent", "bulk")
        page.wait_for_function("document.querySelectorAll('tr.session').length === 1")
        assert page.inner_text("tr.session .key") == "the-bulk-one"
        page.select_option("#filter-agent", "")

        page.select_option("#filter-status", "awaiting_input")
        page.wait_for_selector("#no-sessions", state="visible")
        http.post(f"/sessions/{ids[5]}/turns", json={"input": {"text": "ask me"}})
        wait_idle(http, ids[5], "awaiting_input")
        # the list polls: the session appears without a reload
        page.wait_for_selector("tr.session[data-status='awaiting_input']")
        assert page.inner_text("tr.session .key") == "k-05"
        asked = http.get(f"/sessions/{ids[5]}").json()  # its turn moved its last activity
        moved = datetime.fromisoformat(asked["last_activity_at"])
        assert moved > datetime.fromisoformat(asked["created_at"])
        page.wait_for_selector(f"tr.session td.activity[data-at='{asked['last_activity_at']}']")
    assert page.errors == []


def test_ui_shows_hostile_text_tool_input_and_payloads_as_text(
    served_open: Served, page: object
) -> None:
    with served_open.client() as http:
        session = http.post(
            "/sessions", json={"agent": "helper", "key": HOSTILE, "data": {"note": HOSTILE}}
        ).json()
        sid = session["id"]
        body = {"input": {"text": "hostile " + HOSTILE, "payload": {"html": HOSTILE}}}
        http.post(f"/sessions/{sid}/turns", json=body)
        wait_idle(http, sid)
        assert post_webhook(served_open, {"key": HOSTILE, "x": HOSTILE}, "m1").status_code == 202
        wait_idle(http, sid)
    page.goto(served_open.base + "/ui")
    page.wait_for_selector("tr.session")
    assert page.inner_text("tr.session .key") == HOSTILE
    page.click("tr.session")
    page.wait_for_selector(".source-webhook")
    conversation = page.inner_text("#conversation")
    assert conversation.count("<script>") >= 4  # reply text, tool input, tool result, payloads
    assert "onerror=" in page.inner_text(".tool-call .tool-input")
    assert page.locator("#conversation script, #conversation img[src='x']").count() == 0
    assert page.locator("main script, main img:not(.image)").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert page.errors == []
