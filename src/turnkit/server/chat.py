"""``POST /sessions/{id}/chat``: the Vercel AI SDK's UI message stream protocol (v1).

The request body is what the ``ai`` package's ``DefaultChatTransport`` sends
(``{id, messages: [UIMessage], trigger, ...}``); the session is the one in
the path. The text parts of the last user message become the input
(``source="user"``) and that UI message's ``id`` is its idempotency key, so
a retried request runs nothing twice: it streams the same turn again.

The answer is ``text/event-stream`` with ``x-vercel-ai-ui-message-stream:
v1``: one JSON chunk per ``data:`` line, then ``data: [DONE]``. The turn's
durable events and live deltas (``follow(live=True)``) are translated by
:class:`UIMessageStream`: ``start`` (the turn id as ``messageId``), a
``start-step`` / ``finish-step`` per model call, ``text-*`` and
``reasoning-*`` parts from the deltas (or whole, from the recorded reply
when nothing streamed, as on a retry), ``tool-input-start`` /
``tool-input-delta`` / ``tool-input-available`` for each call,
``tool-output-available`` (or ``tool-output-error``) for its result, a
``data-question`` part when the turn asks, ``error`` for a failed turn,
``abort`` for a cancelled one, and ``finish``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Path
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from turnkit.errors import InvalidInputError, SlowFollowerError
from turnkit.server.problems import responses

__all__ = ["ChatRequest", "UIMessageStream", "chat_route"]

HEADERS = {
    "x-vercel-ai-ui-message-stream": "v1",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
}


class UIMessageIn(BaseModel):
    """A UI message as the AI SDK sends it (only its id, role and text parts are read)."""

    model_config = ConfigDict(extra="allow")
    id: str = Field(min_length=1, max_length=500)
    role: str
    parts: list[dict[str, Any]] = Field(default_factory=list, max_length=1000)


class ChatRequest(BaseModel):
    """The body of ``DefaultChatTransport``'s request."""

    model_config = ConfigDict(extra="allow")
    id: str | None = None
    messages: list[UIMessageIn] = Field(min_length=1, max_length=10_000)
    trigger: str | None = None


def chat_route(router: APIRouter, app: Any) -> None:
    """Add ``POST /sessions/{id}/chat`` to ``router``."""

    @router.post(
        "/sessions/{session_id}/chat",
        responses={
            200: {
                "description": "the turn as an AI SDK UI message stream (v1)",
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            }
        }
        | responses(400, 404, 409, 413, 415, 422),
    )
    async def chat(
        body: ChatRequest, session_id: str = Path(min_length=1, max_length=64)
    ) -> StreamingResponse:
        """Send the last user message's text and stream the turn that answers it."""
        last = next((m for m in reversed(body.messages) if m.role == "user"), None)
        if last is None:
            raise InvalidInputError("messages", "there is no user message to send")
        text = "\n".join(
            str(part.get("text", "")) for part in last.parts if part.get("type") == "text"
        )
        await app.get_session(session_id)  # a 404 first, whatever the input
        receipt = await app.send(session_id, text=text, idempotency_key=last.id)
        return StreamingResponse(
            _chunks(app, session_id, receipt.turn_id),
            media_type="text/event-stream",
            headers=HEADERS,
        )


async def _chunks(app: Any, session_id: str, turn_id: str | None) -> AsyncIterator[str]:
    stream = UIMessageStream(turn_id or "")
    for chunk in stream.start():
        yield _line(chunk)
    if turn_id is not None:
        after = await asyncio.to_thread(_start_seq, app, session_id, turn_id)
        follower = app.follow(session_id, after=after, live=True)
        try:
            async for item in follower:
                for chunk in stream.take(item):
                    yield _line(chunk)
                if stream.done:
                    break
        except SlowFollowerError:
            yield _line({"type": "error", "errorText": "the stream fell behind; reload the chat"})
        finally:
            await follower.aclose()
    if not stream.done:  # held for a question, or the stream fell behind
        yield _line({"type": "finish"})
    yield "data: [DONE]\n\n"


def _line(chunk: dict[str, Any]) -> str:
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"


def _start_seq(app: Any, session_id: str, turn_id: str) -> int:
    from turnkit.sessions.db.live import turn_start_seq

    with app.runtime.store.read() as conn:
        first = turn_start_seq(conn, session_id, turn_id)
    return 0 if first is None else first - 1


class UIMessageStream:
    """One turn's events and live deltas as UI message stream chunks."""

    def __init__(self, turn_id: str) -> None:
        self.turn_id = turn_id
        self.done = False
        self._part: tuple[str, str] | None = None  # the open part: (kind, id)
        self._parts = 0
        self._call: int | None = None  # after_seq of the model call streaming now
        self._streamed = False  # whether the current call's text came as deltas
        self._step = False
        self._tools: set[str] = set()  # calls whose tool-input-start went out

    def start(self) -> list[dict[str, Any]]:
        return [{"type": "start", "messageId": self.turn_id}]

    def take(self, item: Any) -> list[dict[str, Any]]:
        """The chunks for one item of ``follow(live=True)``."""
        if item.turn_id != self.turn_id or self.done:
            return []
        if hasattr(item, "seq"):
            return self._event(item)
        return self._live(item)

    # -- live deltas -----------------------------------------------------------------

    def _live(self, live: Any) -> list[dict[str, Any]]:
        chunks = self._open_step()
        self._call, self._streamed = live.after_seq, True
        text = live.data.get("text", "")
        if live.type == "tool_input.delta":
            chunks += self._close()
            call_id = live.data["call_id"]
            if call_id not in self._tools:
                self._tools.add(call_id)
                name = live.data.get("name") or ""
                chunks.append({"type": "tool-input-start", "toolCallId": call_id, "toolName": name})
            chunks.append(
                {"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": text}
            )
            return chunks
        kind = "text" if live.type == "text.delta" else "reasoning"
        chunks += self._open(kind)
        assert self._part is not None
        chunks.append({"type": f"{kind}-delta", "id": self._part[1], "delta": text})
        return chunks

    def _open_step(self) -> list[dict[str, Any]]:
        if self._step:
            return []
        self._step = True
        return [{"type": "start-step"}]

    def _open(self, kind: str) -> list[dict[str, Any]]:
        if self._part is not None and self._part[0] == kind:
            return []
        chunks = self._close()
        self._parts += 1
        self._part = (kind, f"{self.turn_id}-{self._parts}")
        return [*chunks, {"type": f"{kind}-start", "id": self._part[1]}]

    def _close(self) -> list[dict[str, Any]]:
        if self._part is None:
            return []
        kind, part_id = self._part
        self._part = None
        return [{"type": f"{kind}-end", "id": part_id}]

    # -- durable events ----------------------------------------------------------------

    def _event(self, event: Any) -> list[dict[str, Any]]:
        kind = event.type
        if kind == "message":
            message = event.data["message"]
            if message["role"] == "assistant":
                return self._reply(message["content"])
            return self._results(message["content"])
        if kind == "question.asked":
            return [*self._close(), {"type": "data-question", "data": event.data}]
        if kind == "turn.completed":
            self.done = True
            return [*self._close(), {"type": "finish", "finishReason": "stop"}]
        if kind == "turn.failed":
            self.done = True
            error = event.data.get("error") or event.data.get("reason") or "the turn failed"
            return [*self._close(), {"type": "error", "errorText": error}, {"type": "finish"}]
        if kind == "turn.cancelled":
            self.done = True
            return [*self._close(), {"type": "abort", "reason": event.data.get("reason")}]
        return []

    def _reply(self, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
        chunks = self._open_step()
        streamed, self._streamed, self._call = self._streamed, False, None
        chunks += self._close()
        for block in content:
            kind = block["type"]
            if kind == "tool_use":
                call_id, name = block["id"], block["name"]
                if call_id not in self._tools:
                    self._tools.add(call_id)
                    chunks.append(
                        {"type": "tool-input-start", "toolCallId": call_id, "toolName": name}
                    )
                chunks.append(
                    {"type": "tool-input-available", "toolCallId": call_id, "toolName": name}
                    | {"input": block["input"]}
                )
            elif not streamed and kind in ("text", "thinking") and block.get(kind):
                part = "text" if kind == "text" else "reasoning"
                chunks += self._open(part)
                assert self._part is not None
                chunks.append({"type": f"{part}-delta", "id": self._part[1], "delta": block[kind]})
                chunks += self._close()
        self._step = False
        return [*chunks, {"type": "finish-step"}]

    def _results(self, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
        chunks: list[dict[str, Any]] = []
        for block in content:
            if block["type"] != "tool_result" or block["tool_use_id"] not in self._tools:
                continue
            output = block.get("content", "")
            call_id = block["tool_use_id"]
            if block.get("is_error"):
                text = output if isinstance(output, str) else json.dumps(output)
                chunks.append(
                    {"type": "tool-output-error", "toolCallId": call_id, "errorText": text}
                )
            else:
                chunks.append(
                    {"type": "tool-output-available", "toolCallId": call_id, "output": output}
                )
        return chunks
