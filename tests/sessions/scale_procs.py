"""Processes for the scale-out tests: ``turnkit worker`` / ``turnkit serve`` on scale_app.py.

Each is a real child process on loopback, ended by its own pid only (SIGKILL
for a crash, SIGINT for a stop).
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import sqlalchemy as sa

from turnkit.sessions import App

SCALE_APP = Path(__file__).with_name("scale_app.py")


class Proc:
    """``turnkit worker|serve scale_app.py`` in a process of its own."""

    def __init__(
        self,
        kind: str,
        db_url: str,
        tmp: Path,
        *,
        executor_id: str | None = None,
        app: Path = SCALE_APP,
        **env: str,
    ) -> None:
        self.kind = kind
        self.log = tmp / f"{kind}-{time.monotonic_ns()}.log"
        environ = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(sys.path),
            "SCALE_DB": db_url,
            **env,
        }
        environ.pop("TURNKIT_EXECUTOR_ID", None)
        if executor_id is not None:
            environ["TURNKIT_EXECUTOR_ID"] = executor_id
        args = ["--port", "0"] if kind == "serve" else []
        with self.log.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "turnkit", kind, str(app), *args],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=environ,
            )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.banner = self.line(60)
        self.executor_id = self.banner.split(" as executor ", 1)[1].split(",")[0].split()[0]
        self.base = self.banner.split(" at ", 1)[1].split()[0] if kind == "serve" else ""

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())

    def line(self, timeout: float) -> str:
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise AssertionError(
                f"{self.kind} printed nothing within {timeout} s: {self.log.read_text()[-2000:]}"
            ) from None

    def pause(self) -> None:
        """SIGSTOP: the process stalls (as when paused, swapped out or cut off)."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: nothing runs in the child after it."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


def client(url: str, agent: str = "echo") -> App:
    """An App that sends, waits and follows for the workers' agent, running no turns."""
    app = App(url, workers=False, fire_schedules=False)

    @app.agent(agent, model="local")
    def render() -> str:
        return "Run elsewhere."

    return app


def model_calls(marker: Path) -> list[tuple[str, str, float, float]]:
    """(executor, input text, start, end) of every model call made, in any process."""
    if not marker.exists():
        return []
    rows = []
    for line in marker.read_text().splitlines():
        executor, text, start, end = line.split("\t")
        rows.append((executor, text, float(start), float(end)))
    return rows


def calls_per_text(marker: Path) -> Counter[str]:
    return Counter(text for _, text, _, _ in model_calls(marker))


def sa_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def count(url: str, sql: str) -> int:
    engine = sa.create_engine(sa_url(url))
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(sql)).scalar() or 0)
    finally:
        engine.dispose()
