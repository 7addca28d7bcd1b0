"""Child processes of the backends: each in its own process group, never orphaned.

Every backend process starts a new session (``start_new_session=True``), so
its pid is also its process group id and ``os.killpg`` ends it together with
everything it spawned.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

__all__ = [
    "STDERR_TAIL_CHARS",
    "StderrTail",
    "check_command",
    "check_timeout",
    "deadline_after",
    "describe_exit",
    "kill_group",
    "reap",
    "spawn",
    "within",
]

T = TypeVar("T")

STDERR_TAIL_CHARS = 2000
"""How much of the end of stderr an error message quotes."""

_STDERR_KEEP_BYTES = 64 * 1024
_REAP_TIMEOUT_S = 5.0
_WATCHED: dict[int, tuple[asyncio.AbstractEventLoop, int]] = {}  # pid -> (loop, pidfd)


def check_command(command: str | Sequence[str], owner: str) -> tuple[str, ...]:
    """``command`` as a tuple of args: a list as given, a str split with shlex."""
    if isinstance(command, str):
        args = tuple(shlex.split(command))
    elif isinstance(command, Sequence) and all(isinstance(a, (str, os.PathLike)) for a in command):
        args = tuple(os.fspath(a) for a in command)
    else:
        raise TypeError(f"{owner}: command must be a str or a list of str, got {command!r}")
    if not args or not args[0]:
        raise ValueError(f"{owner}: command is empty")
    return args


async def spawn(
    args: Sequence[str],
    *,
    cwd: str | Path | None,
    env: Mapping[str, str] | None,
    stdin: int,
) -> asyncio.subprocess.Process:
    """Start ``args`` in a new process group, stdout and stderr piped.

    When the process exits, what is left of its group is killed: a child that
    inherited stdout would otherwise keep the pipe, and the turn, open.
    """
    process = await asyncio.create_subprocess_exec(
        *args,
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=None if cwd is None else os.fspath(cwd),
        env=None if env is None else dict(env),
        start_new_session=True,
        limit=1024 * 1024,
    )
    _watch_exit(process)
    return process


def _watch_exit(process: asyncio.subprocess.Process) -> None:
    """Kill the rest of the group as soon as the leader exits (Linux pidfd).

    ``Process.wait()`` cannot tell: it also waits for the pipes to close.
    Elsewhere the group is killed when the turn ends (:func:`reap`).
    """
    try:
        fd = os.pidfd_open(process.pid)
    except ProcessLookupError:
        kill_group(process)
        return
    except (AttributeError, OSError):
        return
    loop = asyncio.get_running_loop()

    def exited() -> None:
        _unwatch(process)
        kill_group(process)

    loop.add_reader(fd, exited)
    _WATCHED[process.pid] = (loop, fd)


def _unwatch(process: asyncio.subprocess.Process) -> None:
    watched = _WATCHED.pop(process.pid, None)
    if watched is not None:
        loop, fd = watched
        if not loop.is_closed():
            loop.remove_reader(fd)
        os.close(fd)


def kill_group(process: asyncio.subprocess.Process) -> None:
    """SIGKILL the process group led by ``process`` (what is left of it)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def reap(process: asyncio.subprocess.Process) -> int | None:
    """Kill the process group and wait for the leader's exit code (bounded)."""
    kill_group(process)
    try:
        async with asyncio.timeout(_REAP_TIMEOUT_S):
            return await process.wait()
    except TimeoutError:
        return process.returncode
    finally:
        _unwatch(process)


def describe_exit(code: int | None) -> str:
    """'exited with code 3', 'was killed by signal SIGKILL', ..."""
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"was killed by signal {name}"
    return f"exited with code {code}"


class StderrTail:
    """Drains a process's stderr in the background, keeping its end.

    Draining matters: a process blocked on a full stderr pipe would hang.
    """

    def __init__(self, stream: asyncio.StreamReader | None) -> None:
        self._data = bytearray()
        self._task = None if stream is None else asyncio.create_task(self._drain(stream))

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self._data += chunk
            if len(self._data) > 2 * _STDERR_KEEP_BYTES:
                del self._data[:-_STDERR_KEEP_BYTES]

    async def settle(self, timeout_s: float = 1.0) -> None:
        """Wait (bounded) for the rest of stderr once the process has exited."""
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await asyncio.shield(self._task)
        self._task.cancel()

    def text(self, limit: int = STDERR_TAIL_CHARS) -> str:
        """The end of stderr, decoded, stripped, at most ``limit`` chars."""
        text = self._data[-_STDERR_KEEP_BYTES:].decode("utf-8", "replace").strip()
        return text if len(text) <= limit else "..." + text[-limit:]


def check_timeout(timeout_s: float | None, owner: str) -> float | None:
    """``timeout_s`` if it is None or a positive number, else ValueError."""
    if timeout_s is None:
        return None
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s > 0:
        raise ValueError(f"{owner}: timeout_s must be a positive number or None, got {timeout_s!r}")
    return float(timeout_s)


def deadline_after(timeout_s: float | None) -> float | None:
    """The loop time ``timeout_s`` from now (None: no deadline)."""
    return None if timeout_s is None else asyncio.get_running_loop().time() + timeout_s


async def within(awaitable: Awaitable[T], deadline: float | None) -> T:
    """Await ``awaitable``, raising TimeoutError past ``deadline``."""
    if deadline is None:
        return await awaitable
    async with asyncio.timeout_at(deadline):
        return await awaitable
