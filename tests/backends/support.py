"""Helpers of the backend tests: the peers, their reports, process checks.

The peers are real programs in ``peers/``. They report what they do (their
pids, "I am hanging now") over a Unix socket, so tests wait on those events,
with a timeout, instead of sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import select
import sys
from pathlib import Path
from typing import Any

PEERS = Path(__file__).parent / "peers"
ECHO = [sys.executable, str(PEERS / "echo_agent.py")]
ACP = [sys.executable, str(PEERS / "acp_agent.py")]

WAIT_S = 15.0
"""The bound on every wait of these tests (a peer starts in well under 1 s)."""


class Reports:
    """JSON lines the peers send to a Unix socket, in arrival order."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._serve, path=self.path)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            self._queue.put_nowait(json.loads(line))
        writer.close()

    async def next(self, event: str) -> dict[str, Any]:
        """The next report of ``event`` (earlier other events are skipped)."""
        async with asyncio.timeout(WAIT_S):
            while True:
                item = await self._queue.get()
                if item["event"] == event:
                    return item

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()


def has_exited(pid: int) -> bool:
    """True once ``pid`` has terminated (a zombie counts: it runs no more)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], 0)
        return bool(readable)
    finally:
        os.close(fd)


async def wait_exited(pid: int) -> None:
    """Wait until ``pid`` terminates (its pidfd turns readable), bounded."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    exited = loop.create_future()
    loop.add_reader(fd, lambda: exited.done() or exited.set_result(None))
    try:
        async with asyncio.timeout(WAIT_S):
            await exited
    finally:
        loop.remove_reader(fd)
        os.close(fd)


async def bounded(awaitable: Any) -> Any:
    """``await awaitable``, failing the test rather than hanging."""
    async with asyncio.timeout(WAIT_S):
        return await awaitable


@contextlib.contextmanager
def no_marker(path: Path) -> Any:
    """Assert that ``path`` does not exist after the block."""
    yield
    assert not path.exists(), f"{path} was created: a process started"
