"""AcpBackend: an external agent spoken to with the Agent Client Protocol over stdio.

Built on the ``agent-client-protocol`` package (install ``turnkit[acp]``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import TYPE_CHECKING

from turnkit.agent.results import RunResult, StreamEvent
from turnkit.backends._base import Backend, Conversation
from turnkit.backends._procs import check_command, check_timeout, deadline_after
from turnkit.backends.permissions import PermissionPolicy, check_permission_policy

if TYPE_CHECKING:
    from turnkit._loop_thread import LoopThread
    from turnkit.backends._acp_peer import AcpPeer, AcpStartError

__all__ = ["AcpBackend"]


class AcpBackend(Backend):
    """An ACP agent (``command``, e.g. an editor agent adapter) behind the Agent API.

    >>> from turnkit import Agent, AgentConfig
    >>> async def main() -> None:  # doctest: +SKIP
    ...     async with Agent(AgentConfig("coder", backend=AcpBackend("my-acp-agent"))) as agent:
    ...         print((await agent.prompt("Hi")).output)
    ...         print((await agent.prompt("And again?")).output)  # the same session

    - ``command``: a list of args, or a str split with :func:`shlex.split`.
    - ``cwd``: the process's working directory and the session's ``cwd``
      (default: the current directory); ``env``: its environment (None:
      inherit).
    - ``permission_policy``: how ``session/request_permission`` is answered:
      ``"deny"`` (the default) selects the agent's reject option, ``"allow"``
      its allow option, and a function (sync or async) given a
      :class:`~turnkit.backends.PermissionRequest` returns True (allow), False
      or None (deny) or the ``option_id`` to select. A function that raises
      denies and fails the run with its error.
    - ``timeout_s``: the most one turn may take (starting the agent
      included). On timeout the turn gets ``session/cancel``; an agent that
      does not end the turn within a short grace is killed.

    ``run()`` and ``stream()`` are fresh: a new process and session per run,
    closed when it ends. ``prompt()`` continues one session per Agent, its
    process kept alive across prompts (and across event loops, so
    ``prompt_sync`` works too) until ``agent.aclose()``; a session whose
    process failed is replaced by a new one at the next prompt. Agent message
    chunks stream as ``text_delta``, thought chunks as ``thinking_delta``,
    tool calls as ``tool_use``/``tool_result``; the reply is one assistant
    message (thinking, then text; ``origin.provider`` is ``"acp"``). Stop
    reasons map to ``RunResult.stop_reason``: ``end_turn``, ``max_tokens`` and
    ``refusal`` as they are, ``max_turn_requests`` to a failed ``max_turns``,
    ``cancelled`` to a failed ``cancelled``. Cancelling the awaiting task
    sends ``session/cancel``. The process leads its own process group, which
    is killed when it is closed.
    """

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        permission_policy: PermissionPolicy = "deny",
        timeout_s: float | None = None,
    ) -> None:
        import importlib.util

        if importlib.util.find_spec("acp") is None:
            raise ModuleNotFoundError(
                "AcpBackend needs the agent-client-protocol package: pip install 'turnkit[acp]'"
            )
        self.command = check_command(command, "AcpBackend")
        self.cwd = cwd
        self.env = None if env is None else dict(env)
        self.permission_policy = check_permission_policy(permission_policy)
        self.timeout_s = check_timeout(timeout_s, "AcpBackend")

    def __repr__(self) -> str:
        return f"AcpBackend({list(self.command)!r})"

    @property
    def label(self) -> str:
        """How errors name this agent."""
        text = shlex.join(self.command)
        return f"the ACP agent `{text if len(text) <= 120 else text[:117] + '...'}`"

    async def turn(self, prompt: str) -> AsyncIterator[StreamEvent]:
        """A fresh process and session for one prompt; closed at the end."""
        from turnkit.backends._acp_peer import AcpPeer, AcpStartError

        deadline = deadline_after(self.timeout_s)
        try:
            peer = await AcpPeer.start(self, deadline)
        except AcpStartError as err:
            yield StreamEvent("done", result=_start_failed(err))
            return
        try:
            async with aclosing(peer.turn(prompt, deadline)) as events:
                async for event in events:
                    yield event
        finally:
            await peer.close()

    def conversation(self) -> Conversation:
        """One session for an Agent's ``prompt()`` turns."""
        return _AcpSession(self)


def _start_failed(err: AcpStartError) -> RunResult:
    """The result of a turn whose agent did not start (in time: ``timeout``)."""
    return RunResult(False, stop_reason="timeout" if err.timed_out else "error", error=str(err))


class _Leftovers:
    """What a forgotten session leaves behind, for its finalizer to clean up."""

    def __init__(self) -> None:
        self.peer: AcpPeer | None = None
        self.thread: LoopThread | None = None


def _abandon(leftovers: _Leftovers) -> None:
    """Kill the process group of a session nobody closed, then close it and its loop.

    The kill is immediate (this may run at interpreter exit); the rest runs
    on the session's loop, nobody waiting for it.
    """
    peer, thread = leftovers.peer, leftovers.thread
    if peer is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(peer.process.pid, signal.SIGKILL)
    if thread is not None:
        thread.stop_nowait(None if peer is None else peer.close())


class _AcpSession(Conversation):
    """One ACP process and session, kept on a private loop across prompts."""

    def __init__(self, backend: AcpBackend) -> None:
        self._backend = backend
        self._thread: LoopThread | None = None
        # Used on the thread's loop only; the lock makes aclose() wait for a turn.
        self._peer: AcpPeer | None = None
        self._lock = asyncio.Lock()
        self._leftovers = _Leftovers()
        weakref.finalize(self, _abandon, self._leftovers)

    async def send(self, prompt: str) -> RunResult:
        from turnkit._loop_thread import LoopThread

        if self._thread is None:
            self._thread = LoopThread("turnkit-acp-session")
            self._leftovers.thread = self._thread
            self._lock = asyncio.Lock()  # for the new thread's loop
        return await self._thread.call(self._send(prompt))

    async def _send(self, prompt: str) -> RunResult:
        """The turn, on the session's loop; (re)starts the agent when needed."""
        async with self._lock:
            deadline = deadline_after(self._backend.timeout_s)
            peer = self._peer
            if peer is None:
                from turnkit.backends._acp_peer import AcpPeer, AcpStartError

                try:
                    peer = self._peer = await AcpPeer.start(self._backend, deadline)
                except AcpStartError as err:
                    return _start_failed(err)
                self._leftovers.peer = peer
            result: RunResult | None = None
            try:
                async with aclosing(peer.turn(prompt, deadline)) as events:
                    async for event in events:
                        if event.type == "done":
                            result = event.result
            finally:
                if not peer.usable:
                    await self._close_peer()
            assert result is not None
            return result

    async def _close_peer(self) -> None:
        peer, self._peer = self._peer, None
        if peer is not None:
            self._leftovers.peer = None
            await peer.close()

    async def _shut(self) -> None:
        async with self._lock:
            await self._close_peer()

    async def aclose(self) -> None:
        """Close the session's process, then its loop."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        try:
            await thread.call(self._shut())
        finally:
            self._leftovers.thread = None
            await thread.stop()
