"""One ACP agent process: its connection, one session, and its prompt turns."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import acp
from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation

from turnkit.agent.results import RunResult, StreamEvent
from turnkit.backends._acp_client import TurnClient
from turnkit.backends._procs import StderrTail, describe_exit, reap, spawn, within
from turnkit.messages import Block, Message, Origin, TextBlock, ThinkingBlock
from turnkit.providers.base import Usage

if TYPE_CHECKING:
    from turnkit.backends.acp import AcpBackend

__all__ = ["AcpPeer", "AcpStartError"]

CANCEL_GRACE_S = 2.0
"""How long an agent has to answer session/cancel before its process is killed."""

_EXIT_GRACE_S = 2.0

# ACP stop reason -> (RunResult.stop_reason, error for a failed run or None)
_STOPS: dict[str, tuple[str, str | None]] = {
    "end_turn": ("end_turn", None),
    "max_tokens": ("max_tokens", None),
    "refusal": ("refusal", None),
    "max_turn_requests": (
        "max_turns",
        "the ACP agent stopped the turn: it reached its limit of model requests per turn",
    ),
    "cancelled": ("cancelled", "the ACP agent cancelled the turn"),
}


class AcpStartError(Exception):
    """The agent process could not be started, initialized or given a session.

    ``timed_out``: the turn's timeout passed while it was starting.
    """

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class AcpPeer:
    """An ACP agent process with one session; ``usable`` until it fails or closes."""

    def __init__(self, backend: AcpBackend, process: asyncio.subprocess.Process) -> None:
        self.backend = backend
        self.process = process
        self.stderr = StderrTail(process.stderr)
        self.client = TurnClient(backend.permission_policy)
        self.conn = acp.connect_to_agent(self.client, process.stdin, process.stdout)
        self.session_id = ""
        self.agent_name = Path(backend.command[0]).name
        self.usable = True
        self._closed = False

    @classmethod
    async def start(cls, backend: AcpBackend, deadline: float | None) -> AcpPeer:
        """Spawn the agent, initialize, open a session; AcpStartError on failure."""
        try:
            process = await spawn(
                backend.command, cwd=backend.cwd, env=backend.env, stdin=asyncio.subprocess.PIPE
            )
        except OSError as err:
            raise AcpStartError(f"could not start {backend.label}: {err}") from err
        peer = cls(backend, process)
        try:
            await within(peer._open(), deadline)
        except BaseException as err:
            await peer.close()
            if not isinstance(err, Exception):
                raise
            timed_out = isinstance(err, TimeoutError)
            message = peer.failure("failed to start", err)
            raise AcpStartError(message, timed_out=timed_out) from err
        return peer

    async def _open(self) -> None:
        from turnkit import __version__

        init = await self.conn.initialize(
            protocol_version=acp.PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(
                fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
                terminal=False,
            ),
            client_info=Implementation(name="turnkit", version=__version__),
        )
        if init.agent_info is not None and init.agent_info.name:
            self.agent_name = init.agent_info.name
        cwd = os.fspath(self.backend.cwd) if self.backend.cwd is not None else os.getcwd()
        session = await self.conn.new_session(cwd=os.path.abspath(cwd), mcp_servers=[])
        self.session_id = session.session_id

    async def turn(self, text: str, deadline: float | None) -> AsyncIterator[StreamEvent]:
        """One prompt turn: its events, then ``done`` with the RunResult.

        A timeout or the caller's cancellation sends ``session/cancel`` and
        waits (briefly) for the agent to end the turn; an agent that does not
        is marked unusable, for its owner to close.
        """
        queue: asyncio.Queue[StreamEvent | None] = asyncio.Queue()
        self.client.queue, self.client.policy_errors = queue, []
        prompt = self.conn.prompt(session_id=self.session_id, prompt=[acp.text_block(text)])
        task = asyncio.create_task(prompt)
        task.add_done_callback(lambda _: queue.put_nowait(None))
        texts: list[str] = []
        thoughts: list[str] = []
        try:
            while (event := await within(queue.get(), deadline)) is not None:
                if event.type in ("text_delta", "thinking_delta"):
                    (texts if event.type == "text_delta" else thoughts).append(event.text)
                yield event
        except TimeoutError:
            await self._cancel(task)
            timeout = self.backend.timeout_s
            error = f"{self.backend.label} timed out after {timeout:g}s"
            if not self.usable:
                error += " and did not answer session/cancel; its process group was killed"
            yield StreamEvent("done", result=RunResult(False, stop_reason="timeout", error=error))
            return
        except (asyncio.CancelledError, GeneratorExit):
            await self._cancel(task)
            raise
        finally:
            self.client.queue = None
        yield StreamEvent("done", result=await self._outcome(task, texts, thoughts))

    async def _cancel(self, task: asyncio.Task[Any]) -> None:
        """Send session/cancel and wait for the turn to end, or give the agent up."""
        if task.done():
            return
        with contextlib.suppress(Exception):
            await self.conn.cancel(session_id=self.session_id)
        done, _ = await asyncio.wait({task}, timeout=CANCEL_GRACE_S)
        if not done:
            self.usable = False
            task.cancel()
            await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # retrieved: the turn is over either way

    async def _outcome(
        self, task: asyncio.Task[Any], texts: list[str], thoughts: list[str]
    ) -> RunResult:
        try:
            response = task.result()
        except Exception as err:
            self.usable = False
            await self.close()
            error = self.failure("failed during the prompt", err)
            return RunResult(False, stop_reason="error", error=error)
        stop_reason, error = _STOPS.get(response.stop_reason, (response.stop_reason, None))
        if self.client.policy_errors:
            error = "; ".join(self.client.policy_errors)
        if error is not None:
            return RunResult(False, stop_reason=stop_reason, error=error)
        content: list[Block] = [ThinkingBlock("".join(thoughts))] if thoughts else []
        output = "".join(texts)
        content.append(TextBlock(output))
        origin = Origin("acp", self.agent_name)
        message = Message("assistant", tuple(content), origin=origin)
        return RunResult(True, output, (message,), _usage(response.usage), stop_reason)

    def failure(self, what: str, err: BaseException) -> str:
        """An error message for ``err``: how the process ended, and its stderr."""
        code = self.process.returncode
        if isinstance(err, TimeoutError):
            message = f"{self.backend.label} {what}: timed out after {self.backend.timeout_s:g}s"
        elif isinstance(err, (ConnectionError, BrokenPipeError)) or code is not None:
            message = f"{self.backend.label} {what}: its process {describe_exit(code)}"
        else:
            message = f"{self.backend.label} {what}: {type(err).__name__}: {_describe(err)}"
        stderr = self.stderr.text()
        return f"{message}; stderr:\n{stderr}" if stderr else f"{message} (stderr was empty)"

    async def close(self) -> None:
        """End the connection and the process group (stdin EOF first, then SIGKILL)."""
        if self._closed:
            return
        self._closed, self.usable = True, False
        with contextlib.suppress(Exception):
            await self.conn.close()
        if self.process.stdin is not None:
            self.process.stdin.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_EXIT_GRACE_S):
                await self.process.wait()
        await reap(self.process)
        await self.stderr.settle()


def _describe(err: BaseException) -> str:
    if isinstance(err, acp.RequestError) and err.data:
        return f"{err} ({err.data})"
    return str(err)


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    return Usage(
        usage.input_tokens,
        usage.output_tokens,
        usage.cached_read_tokens or 0,
        usage.cached_write_tokens or 0,
    )
