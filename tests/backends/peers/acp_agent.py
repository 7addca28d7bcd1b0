"""A real ACP agent for the AcpBackend tests, on the agent side of ``acp``.

Each prompt is one turn of its session (turns are counted per session):
a thought chunk, then the reply ``turn <n>: you said <text>`` in three
message chunks. Words in the prompt change the turn:

- ``tool``: reports a tool call, asks permission for it, and finishes it
  (completed when allowed, failed when denied); the reply then ends with
  ``[permission: allowed|denied]``.
- ``hang``: sends one chunk and waits for ``session/cancel`` (forever with
  ``--ignore-cancel``), then ends the turn as cancelled.
- ``crash``: writes to stderr and exits with code 3 mid-turn.
- ``refuse`` / ``limit`` / ``loop``: stop reasons refusal / max_tokens /
  max_turn_requests.

``--crash-on-start`` exits with code 2 before speaking ACP. ``--report SOCK``
sends JSON lines (started, prompt, hang, cancel; with the pid) to a Unix
socket; ``--touch PATH`` creates PATH at start; ``--cancel-marker PATH`` is
created when session/cancel arrives.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import sys
import uuid
from pathlib import Path
from typing import Any

import acp
from acp.schema import (
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
)

STOPS = {"refuse": "refusal", "limit": "max_tokens", "loop": "max_turn_requests"}


class PeerAgent:
    """The agent: turn counts and cancel events per session."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.conn: Any = None
        self.turns: dict[str, int] = {}
        self.cancels: dict[str, asyncio.Event] = {}
        self.sock: socket.socket | None = None
        if args.report:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(args.report)

    def report(self, event: str, **data: Any) -> None:
        if self.sock is not None:
            line = {"event": event, "pid": os.getpid(), **data}
            self.sock.sendall(json.dumps(line).encode() + b"\n")

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_info=Implementation(name="peer-acp", version="1.0"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = str(uuid.uuid4())
        self.turns[session_id] = 0
        self.report("session", cwd=cwd)
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.report("cancel")
        if self.args.cancel_marker:
            Path(self.args.cancel_marker).touch()
        if not self.args.ignore_cancel:
            self.cancels.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        text = "".join(block.text for block in prompt if getattr(block, "type", "") == "text")
        self.turns[session_id] += 1
        turn = self.turns[session_id]
        self.cancels[session_id] = asyncio.Event()
        self.report("prompt", text=text, turn=turn)
        await self.say(session_id, acp.update_agent_thought_text(f"thinking about {text!r}"))
        if "crash" in text:
            sys.stderr.write("peer crashed on purpose\n")
            sys.stderr.flush()
            os._exit(3)
        if "hang" in text:
            await self.say(session_id, acp.update_agent_message_text("working"))
            self.report("hang")
            await self.cancels[session_id].wait()
            return PromptResponse(stop_reason="cancelled")
        suffix = ""
        if "tool" in text:
            suffix = f" [permission: {await self.use_tool(session_id)}]"
        for chunk in (f"turn {turn}: ", "you said ", text + suffix):
            await self.say(session_id, acp.update_agent_message_text(chunk))
        stop = next((STOPS[word] for word in STOPS if word in text), "end_turn")
        return PromptResponse(stop_reason=stop)

    async def use_tool(self, session_id: str) -> str:
        call = {"tool_call_id": "call-1", "title": "Read notes", "kind": "read"}
        raw_input = {"path": "notes.txt"}
        start = acp.start_tool_call(**call, status="pending", raw_input=raw_input)
        await self.say(session_id, start)
        options = [
            PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
            PermissionOption(option_id="no", name="Reject", kind="reject_once"),
        ]
        answer = await self.conn.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(**call, raw_input=raw_input),
            options=options,
        )
        outcome = answer.outcome
        allowed = outcome.outcome == "selected" and outcome.option_id == "yes"
        result = "notes: buy milk" if allowed else "permission denied"
        update = acp.update_tool_call(
            "call-1",
            status="completed" if allowed else "failed",
            content=[acp.tool_content(acp.text_block(result))],
        )
        await self.say(session_id, update)
        return "allowed" if allowed else "denied"

    async def say(self, session_id: str, update: Any) -> None:
        await self.conn.session_update(session_id=session_id, update=update)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--crash-on-start", action="store_true")
    parser.add_argument("--ignore-cancel", action="store_true")
    parser.add_argument("--report")
    parser.add_argument("--touch")
    parser.add_argument("--cancel-marker")
    args = parser.parse_args()
    if args.touch:
        Path(args.touch).touch()
    if args.crash_on_start:
        sys.stderr.write("peer could not start: bad configuration\n")
        sys.exit(2)
    agent = PeerAgent(args)
    agent.report("started")
    asyncio.run(acp.run_agent(agent))


if __name__ == "__main__":
    main()
