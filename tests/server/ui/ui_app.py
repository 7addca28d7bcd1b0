"""The App the inspector's browser tests serve: ``turnkit serve tests/server/ui/ui_app.py``.

One ScriptedModel answers every session; what it does depends on the
input's text, so each test drives a session by what it types:
``ask`` asks a question with options, ``tool`` calls a tool, ``image``
replies with an image, ``think`` thinks first, ``hostile`` puts markup in
text, tool input and tool result, ``refund`` calls a tool that needs
approval, ``slow`` streams its reply and holds it half-way until the file
``$UI_TEST_GATE`` exists; anything else is echoed. Agent ``bulk`` writes
1,000 messages in one turn.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import os
import struct
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ui_constants import HOSTILE, WEBHOOK_SECRET

import turnkit
from turnkit.sessions import App
from turnkit.testing import ScriptedModel


def _png(width: int, height: int) -> str:
    """A base64 PNG of colour bars, made here (no image files in the repo)."""
    rows = b"".join(
        b"\x00" + b"".join(bytes((40 * (x // 10) % 256, 120, 200)) for x in range(width))
        for _ in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows))
    return base64.b64encode(png + chunk(b"IEND", b"")).decode()


PIXEL = _png(80, 40)

app = App(os.environ["TURNKIT_DATABASE_URL"], fire_schedules=False)


@turnkit.tool
def lookup(order: str, note: str = "") -> str:
    """Look an order up."""
    return HOSTILE if order == "hostile" else f"order {order}: shipped"


@turnkit.tool(needs_approval=True)
def refund(order: str, amount: float) -> str:
    """Refund an order (a person approves it first)."""
    return f"refunded {amount} on order {order}"


@turnkit.tool
def noop(step: int) -> str:
    """Do nothing, for long sessions."""
    return f"step {step} done"


def _call(name: str, call_id: str, args: dict[str, Any], text: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content.append({"type": "tool_use", "id": call_id, "name": name, "input": args})
    return {"role": "assistant", "content": content}


def helper_reply(request: Any) -> Any:
    last = request.messages[-1]
    results = [b for b in last.content if getattr(b, "type", "") == "tool_result"]
    if results:
        result = results[0].content
        text = (
            result if isinstance(result, str) else " ".join(getattr(b, "text", "") for b in result)
        )
        return f"Noted: {text}"
    said = request.last_text.strip().lower()
    turn = len(request.messages)
    if said.startswith("ask"):
        options = [{"label": "Small", "value": "s"}, {"label": "Large", "value": "l"}]
        return _call("ask", f"ask{turn}", {"question": "Which size?", "options": options})
    if said.startswith("tool"):
        return _call("lookup", f"look{turn}", {"order": "7"}, "Let me look.")
    if said.startswith("hostile"):
        return _call("lookup", f"bad{turn}", {"order": "hostile", "note": HOSTILE}, HOSTILE)
    if said.startswith("image"):
        source = {"type": "base64", "media_type": "image/png", "data": PIXEL}
        content = [
            {"type": "text", "text": "Here is the chart."},
            {"type": "image", "source": source},
        ]
        return {"role": "assistant", "content": content}
    if said.startswith("think"):
        thought = {"type": "thinking", "thinking": "The user wants a plan.", "signature": "sig"}
        return {"role": "assistant", "content": [thought, {"type": "text", "text": "Plan: rest."}]}
    if said.startswith("refund"):
        return _call("refund", f"refund{turn}", {"order": "42", "amount": 9.5}, "Refunding.")
    if said.startswith("slow"):
        return "Streaming this reply word by word until the gate opens and then it is done."
    return f"echo: {request.last_text}"


_streaming: contextvars.ContextVar[bool] = contextvars.ContextVar("streaming", default=False)


class GatedModel(ScriptedModel):
    """A ScriptedModel whose ``slow`` reply stops half-way until a file exists: after
    four deltas when it streams, before answering when it is asked without streaming."""

    async def request(self, request: Any) -> Any:
        response = await super().request(request)
        if not _streaming.get() and _text(response.message).startswith("Streaming"):
            await _gate()
        return response

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        pieces: list[str] = []
        _streaming.set(True)
        async for event in super().stream(request):
            yield event
            if event.type == "text_delta":
                pieces.append(event.text)
                if len(pieces) == 4 and pieces[0] == "Streaming":
                    await _gate()

    def __repr__(self) -> str:
        return "GatedModel()"


def _text(message: Any) -> str:
    return "".join(getattr(block, "text", "") for block in message.content)


async def _gate() -> None:
    gate = os.environ.get("UI_TEST_GATE")
    if not gate:
        return
    for _ in range(400):  # 20 s at most
        if Path(gate).exists():
            return
        await asyncio.sleep(0.05)


@app.agent("helper", model=GatedModel([helper_reply] * 5000), tools=[lookup, refund])
def helper() -> str:
    turnkit.use_tool("ask")
    return "Help the user."


def bulk_reply(request: Any) -> Any:
    steps = sum(1 for m in request.messages if m.role == "assistant")
    if steps < 499:
        return _call("noop", f"n{steps}", {"step": steps}, f"Step {steps} of a long session.")
    return "All 499 steps are done."


@app.agent("bulk", model=ScriptedModel([bulk_reply] * 5000), tools=[noop], max_turns=600)
def bulk() -> str:
    return "Work through the steps."


app.webhook("orders", agent="helper", secret=WEBHOOK_SECRET, session_key=lambda body: body["key"])
