"""A real ``turnkit serve`` of ui_app.py, and headless Chromium (Debian's) driven by Playwright.

The server is a child process started here and ended by its pid; the
browser is launched from /usr/bin/chromium (never downloaded). Screenshots
of the main views go to tests/artifacts/ui/.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from .ui_constants import WEBHOOK_SECRET

ROOT = Path(__file__).parents[3]
APP = Path(__file__).with_name("ui_app.py")
KEY = "ui-test-key-0123"
ARTIFACTS = ROOT / "tests" / "artifacts" / "ui"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

playwright_api = pytest.importorskip("playwright.sync_api")


@dataclass
class Served:
    base: str
    key: str | None
    gate: Path
    pid: int

    def client(self) -> httpx2.Client:
        headers = {"Authorization": f"Bearer {self.key}"} if self.key else {}
        return httpx2.Client(base_url=self.base, headers=headers, timeout=30)


def _serve(tmp_path: Path, key: str | None) -> Iterator[Served]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "TURNKIT_DATABASE_URL": f"sqlite:///{tmp_path / 'ui.db'}",
        "UI_TEST_GATE": str(tmp_path / "gate"),
    }
    env.pop("TURNKIT_API_KEY", None)
    command = [sys.executable, "-m", "turnkit", "serve", str(APP), "--port", "0"]
    if key:
        command += ["--api-key", key]
    proc = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        banner = proc.stdout.readline()  # type: ignore[union-attr]
        assert banner.startswith("turnkit: serving agents"), banner + proc.stderr.read()  # type: ignore[union-attr]
        base = banner.split(" at ", 1)[1].split()[0]
        yield Served(base, key, tmp_path / "gate", proc.pid)
    finally:
        os.kill(proc.pid, signal.SIGINT)
        try:
            proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.communicate(timeout=10)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """The test app behind ``turnkit serve --api-key``."""
    yield from _serve(tmp_path, KEY)


@pytest.fixture
def served_open(tmp_path: Path) -> Iterator[Served]:
    """The test app behind ``turnkit serve`` without a key (loopback only)."""
    yield from _serve(tmp_path, None)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: apt-get install chromium (.ci/run does)")
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
        )
        yield launched
        launched.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    # bypass_csp lets Playwright evaluate its wait conditions; it also means the
    # hostile-content tests pass on the page's own escaping, not on the CSP.
    context = browser.new_context(  # type: ignore[attr-defined]
        viewport={"width": 1200, "height": 900}, bypass_csp=True
    )
    opened = context.new_page()
    opened.set_default_timeout(10_000)
    errors: list[str] = []
    opened.on("pageerror", lambda err: errors.append(str(err)))
    opened.errors = errors
    yield opened
    context.close()


def screenshot(page: object, name: str) -> Path:
    """Save the page as tests/artifacts/ui/<name>.png (the artifact of a main view)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)  # type: ignore[attr-defined]
    return path


def sign_in(page: object, served: Served, path: str = "/ui") -> None:
    """Open the page and give it the key at its prompt."""
    page.goto(served.base + path)  # type: ignore[attr-defined]
    page.fill("#api-key", served.key or "")  # type: ignore[attr-defined]
    page.click("#key-form button")  # type: ignore[attr-defined]
    page.wait_for_selector("table.sessions, #conversation")  # type: ignore[attr-defined]


def post_webhook(served: Served, body: dict[str, object], message_id: str) -> httpx2.Response:
    """A signed delivery to the test app's ``orders`` webhook."""
    import json
    import time
    from datetime import UTC, datetime

    from standardwebhooks.webhooks import Webhook

    raw = json.dumps(body)
    stamp = int(time.time())
    signature = Webhook(WEBHOOK_SECRET).sign(message_id, datetime.fromtimestamp(stamp, UTC), raw)
    headers = {
        "webhook-id": message_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": signature,
        "Content-Type": "application/json",
    }
    return httpx2.post(f"{served.base}/webhooks/orders", content=raw, headers=headers, timeout=30)


def wait_idle(http: httpx2.Client, session_id: str, status: str = "idle") -> dict[str, object]:
    """Wait (bounded) until the session reaches ``status``, by following its events."""
    import time

    deadline = time.monotonic() + 20
    with http.stream(
        "GET", f"/sessions/{session_id}/events", headers={"Accept": "text/event-stream"}
    ) as stream:
        session = http.get(f"/sessions/{session_id}").json()
        if session["status"] == status:
            return session
        for line in stream.iter_lines():
            if time.monotonic() > deadline:
                break
            if line.startswith(("event: turn.completed", "event: turn.failed", "event: question.")):
                session = http.get(f"/sessions/{session_id}").json()
                if session["status"] == status:
                    return session
                if session["status"] != "running":  # settled elsewhere: fail now, not later
                    break
    raise AssertionError(f"session {session_id} is {session['status']}, not {status}")


class CuttableProxy:
    """A TCP relay on 127.0.0.1 in front of the server whose connections the test can
    cut, as a network drop would (``cut()``), and refuse while ``down``."""

    def __init__(self, upstream: str) -> None:
        import socket
        import threading

        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.down = False
        self.sockets: list[socket.socket] = []
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            server = socket.create_connection(self.upstream, timeout=10)
            server.settimeout(None)
            with self.lock:
                self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: object, sink: object) -> None:
        try:
            while data := source.recv(65536):  # type: ignore[attr-defined]
                sink.sendall(data)  # type: ignore[attr-defined]
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(2)  # type: ignore[attr-defined]

    def cut(self) -> None:
        """Drop every open connection (and refuse new ones until ``down`` is False)."""
        self.down = True
        with self.lock:
            for sock in self.sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(2)
                sock.close()
            self.sockets.clear()

    def close(self) -> None:
        self.cut()
        self.listener.close()


@pytest.fixture
def proxy(served_open: Served) -> Iterator[CuttableProxy]:
    relay = CuttableProxy(served_open.base)
    yield relay
    relay.close()
