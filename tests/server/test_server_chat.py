"""``POST /sessions/{id}/chat`` read by the real AI SDK client (the ``ai`` npm package).

tests/server/node/chat_client.mjs sends the request with ``DefaultChatTransport``
and assembles the answer with ``readUIMessageStream``; it needs ``npm ci`` in
tests/server/node (``.ci/run`` does it).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx2
import pytest

from server.conftest import API_KEY, serving
from turnkit.messages import Message, TextBlock, ThinkingBlock, ToolUseBlock
from turnkit.sessions import App
from turnkit.testing import StreamingScriptedModel

NODE_DIR = Path(__file__).with_name("node")
ANSWER = "Order 42 shipped on Monday; it should arrive tomorrow."


def lookup(order: str) -> str:
    """Look up an order."""
    return f"order {order}: shipped Monday"


def chat_app(db_url: str, model: Any) -> App:
    app = App(db_url, fire_schedules=False)
    app.agent("support", model=model, tools=[lookup])(lambda: "Help with orders.")
    return app


def replies() -> list[Any]:
    call = ToolUseBlock("call_7", "lookup", {"order": "42"})
    first = Message.assistant(ThinkingBlock("I should look it up."), TextBlock("Checking."), call)
    return [first, ANSWER]


def ai_sdk_read(base: str, session_id: str, message_id: str, text: str) -> dict[str, Any]:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("needs Node 20 and npm (the machine image has them; .ci/run installs them)")
    if not (NODE_DIR / "node_modules" / "ai").exists():  # the locked client, from npm
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--silent"],
            cwd=NODE_DIR,
            check=True,
            timeout=300,
        )
    done = subprocess.run(
        ["node", "chat_client.mjs", base, session_id, API_KEY, message_id, text],
        cwd=NODE_DIR,
        capture_output=True,
        text=True,
        timeout=25,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_ai_sdk_client_assembles_text_reasoning_and_tool_parts(db_url: str) -> None:
    model = StreamingScriptedModel(replies(), chunk=4)
    app = chat_app(db_url, model)
    with serving(app) as base:
        auth = {"Authorization": f"Bearer {API_KEY}"}
        sid = httpx2.post(f"{base}/sessions", json={"agent": "support"}, headers=auth).json()["id"]
        read = ai_sdk_read(base, sid, "ui-msg-1", "Where is order 42?")
        again = ai_sdk_read(base, sid, "ui-msg-1", "Where is order 42?")  # a retried request
        history = httpx2.get(f"{base}/sessions/{sid}/messages", headers=auth).json()
    assert read["error"] is None
    message = read["message"]
    assert message["role"] == "assistant"
    parts = message["parts"]
    texts = [p["text"] for p in parts if p["type"] == "text"]
    assert texts == ["Checking.", ANSWER]
    assert [p["text"] for p in parts if p["type"] == "reasoning"] == ["I should look it up."]
    (tool,) = [p for p in parts if p["type"] == "tool-lookup"]
    assert tool["toolCallId"] == "call_7" and tool["state"] == "output-available"
    assert tool["input"] == {"order": "42"}
    assert tool["output"] == "order 42: shipped Monday"
    assert read["snapshots"] > 10  # assembled as it streamed, not at once
    # the retry ran nothing again: the same turn, the model called twice in all
    assert again["message"]["id"] == message["id"]
    assert [p["text"] for p in again["message"]["parts"] if p["type"] == "text"] == texts
    assert len(model.requests) == 2
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]


def test_the_chat_stream_speaks_the_ui_message_stream_protocol(db_url: str) -> None:
    app = chat_app(db_url, StreamingScriptedModel(["Hi there."], chunk=3))
    auth = {"Authorization": f"Bearer {API_KEY}"}
    body = {
        "id": "chat-1",
        "trigger": "submit-message",
        "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}],
    }
    with serving(app) as base, httpx2.Client(base_url=base, headers=auth, timeout=20) as http:
        sid = http.post("/sessions", json={"agent": "support"}).json()["id"]
        with http.stream("POST", f"/sessions/{sid}/chat", json=body) as answer:
            assert answer.headers["x-vercel-ai-ui-message-stream"] == "v1"
            assert answer.headers["content-type"].startswith("text/event-stream")
            lines = [line for line in answer.iter_lines() if line]
        missing = http.post("/sessions/nope/chat", json=body)
        empty = http.post(f"/sessions/{sid}/chat", json={"messages": []})
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert chunks[0]["type"] == "start" and chunks[-1]["type"] == "finish"
    deltas = [c["delta"] for c in chunks if c["type"] == "text-delta"]
    assert "".join(deltas) == "Hi there."
    assert missing.status_code == 404
    assert empty.status_code == 422
