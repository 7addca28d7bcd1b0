"""ProcessBackend: an external agent that is a command, one process per turn."""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import shlex
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Literal

from turnkit.agent.results import RunResult, StreamEvent
from turnkit.backends._base import Backend
from turnkit.backends._procs import (
    StderrTail,
    check_command,
    check_timeout,
    deadline_after,
    describe_exit,
    reap,
    spawn,
    within,
)
from turnkit.messages import Message, Origin, TextBlock

__all__ = ["DEFAULT_MAX_OUTPUT_BYTES", "ProcessBackend"]

DEFAULT_MAX_OUTPUT_BYTES = 16 * 1024 * 1024
"""The most stdout one ProcessBackend turn may write before it is killed."""


class ProcessBackend(Backend):
    """Run each turn as a fresh process of ``command``; its stdout is the reply.

    >>> from turnkit import Agent, AgentConfig
    >>> agent = Agent(AgentConfig("upper", backend=ProcessBackend("tr a-z A-Z")))
    >>> agent.run_sync("shout").output
    'SHOUT'

    - ``command``: a list of args, or a str split with :func:`shlex.split`
      (no shell is involved).
    - ``prompt_via``: ``"stdin"`` writes the prompt to the process's stdin
      and closes it; ``"argument"`` appends it as the last argument (stdin is
      then empty).
    - ``cwd``, ``env``: as for :mod:`subprocess` (None: inherit).
    - ``timeout_s``: the most a turn may take, from start to exit.
    - ``max_output_bytes``: the most stdout a turn may write (default
      :data:`DEFAULT_MAX_OUTPUT_BYTES`, 16 MiB); past it the process group is
      killed and the run fails (stderr keeps only its last 64 KiB anyway).

    The reply is stdout as is, decoded as UTF-8: ``RunResult.output`` and one
    assistant message (``origin`` ``{"provider": "process", "model": <program>}``,
    ``metadata`` ``{"exit_code": 0, "stderr": <its end>}``); ``stream()``
    yields it as ``text_delta`` events while it arrives. A non-zero exit fails
    the run with the exit code and the end of stderr, a timeout fails it with
    ``stop_reason="timeout"``. A prompt the process cannot be given (text
    that is not valid Unicode; a NUL character in an argument) fails the run
    before anything starts. stdin is always closed after the prompt, so a
    process that reads to the end of it never waits for more. The process
    leads its own process group, which is killed when the turn ends, times
    out or is cancelled: nothing it started outlives the turn.
    """

    def __init__(
        self,
        command: str | Sequence[str],
        prompt_via: Literal["stdin", "argument"] = "stdin",
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    ) -> None:
        self.command = check_command(command, "ProcessBackend")
        if prompt_via not in ("stdin", "argument"):
            raise ValueError(
                f"ProcessBackend: prompt_via must be 'stdin' or 'argument', got {prompt_via!r}"
            )
        self.prompt_via = prompt_via
        self.cwd = cwd
        self.env = None if env is None else dict(env)
        self.timeout_s = check_timeout(timeout_s, "ProcessBackend")
        if type(max_output_bytes) is not int or max_output_bytes < 1:
            raise ValueError(
                f"ProcessBackend: max_output_bytes must be a positive int, got {max_output_bytes!r}"
            )
        self.max_output_bytes = max_output_bytes

    def __repr__(self) -> str:
        return f"ProcessBackend({list(self.command)!r})"

    async def turn(self, prompt: str) -> AsyncIterator[StreamEvent]:
        """Run the process on ``prompt``; text deltas, then ``done``."""
        label = _label(self.command)
        by_stdin = self.prompt_via == "stdin"
        problem = _prompt_problem(prompt, by_stdin)
        if problem is not None:
            yield _done(RunResult(False, stop_reason="error", error=f"{label}: {problem}"))
            return
        deadline = deadline_after(self.timeout_s)
        args = self.command if by_stdin else (*self.command, prompt)
        stdin = asyncio.subprocess.PIPE if by_stdin else asyncio.subprocess.DEVNULL
        try:
            process = await spawn(args, cwd=self.cwd, env=self.env, stdin=stdin)
        except (OSError, ValueError) as err:  # ValueError: a NUL in the command or env
            error = f"could not start {label}: {err}"
            yield _done(RunResult(False, stop_reason="error", error=error))
            return
        stderr = StderrTail(process.stderr)
        feeder = asyncio.create_task(_feed(process.stdin, prompt.encode())) if by_stdin else None
        output = _Output(self.max_output_bytes)
        code: int | None = None
        try:
            assert process.stdout is not None
            while data := await within(process.stdout.read(65536), deadline):
                if text := output.add(data):
                    yield StreamEvent("text_delta", text=text)
                if output.over:
                    break
            if text := output.finish():
                yield StreamEvent("text_delta", text=text)
            if not output.over:
                code = await within(process.wait(), deadline)
        except TimeoutError:
            pass
        finally:
            await reap(process)
            if feeder is not None:
                feeder.cancel()
                await asyncio.gather(feeder, return_exceptions=True)
            await stderr.settle()
        if output.over:
            error = (
                f"{label} wrote more than {self.max_output_bytes} bytes to stdout "
                "(max_output_bytes); its process group was killed"
            )
            yield _done(RunResult(False, stop_reason="error", error=error))
            return
        yield _done(self._result(label, code, output.text(), stderr.text()))

    def _result(self, label: str, code: int | None, output: str, stderr: str) -> RunResult:
        if code is None:
            error = f"{label} timed out after {self.timeout_s:g}s; its process group was killed"
            return RunResult(False, stop_reason="timeout", error=_with_stderr(error, stderr))
        if code != 0:
            error = f"{label} {describe_exit(code)}"
            return RunResult(False, stop_reason="error", error=_with_stderr(error, stderr))
        metadata = {"exit_code": 0, "stderr": stderr} if stderr else {"exit_code": 0}
        origin = Origin("process", Path(self.command[0]).name)
        message = Message("assistant", (TextBlock(output),), metadata=metadata, origin=origin)
        return RunResult(True, output, (message,), stop_reason="end_turn")


async def _feed(stdin: asyncio.StreamWriter | None, data: bytes) -> None:
    """Write the prompt to the process, then close its stdin, whatever happens."""
    assert stdin is not None
    try:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(data)
            await stdin.drain()
    finally:
        stdin.close()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        await stdin.wait_closed()


def _prompt_problem(prompt: str, by_stdin: bool) -> str | None:
    """Why ``prompt`` cannot be given to a process, or None."""
    if not isinstance(prompt, str):
        return f"the prompt must be a string, got {type(prompt).__name__}"
    try:
        prompt.encode()
    except UnicodeEncodeError as err:
        return (
            f"the prompt holds a lone surrogate at position {err.start} "
            "(not valid Unicode); it cannot be sent"
        )
    if not by_stdin and "\0" in prompt:
        return "the prompt holds a NUL character, which a command-line argument cannot carry"
    return None


class _Output:
    """stdout decoded as it arrives, up to ``limit`` bytes."""

    def __init__(self, limit: int) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._chunks: list[str] = []
        self._size = 0
        self._limit = limit
        self.over = False

    def add(self, data: bytes) -> str:
        room = self._limit - self._size
        if len(data) > room:
            data, self.over = data[:room], True
        self._size += len(data)
        return self._keep(self._decoder.decode(data))

    def finish(self) -> str:
        return self._keep(self._decoder.decode(b"", final=True))

    def _keep(self, text: str) -> str:
        if text:
            self._chunks.append(text)
        return text

    def text(self) -> str:
        return "".join(self._chunks)


def _label(command: Sequence[str]) -> str:
    text = shlex.join(command)
    return f"the process `{text if len(text) <= 120 else text[:117] + '...'}`"


def _with_stderr(error: str, stderr: str) -> str:
    return f"{error}; stderr:\n{stderr}" if stderr else f"{error} (stderr was empty)"


def _done(result: RunResult) -> StreamEvent:
    return StreamEvent("done", result=result)
