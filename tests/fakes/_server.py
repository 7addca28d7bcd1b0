"""Shared base of the fake provider servers: a stdlib HTTP server on 127.0.0.1.

A fake runs a ``ThreadingHTTPServer`` on an ephemeral port in a daemon thread,
records every request, answers from a script of neutral replies, and turns a
:class:`Refusal` raised anywhere in a handler into the provider's JSON error.

Example::

    with FakeAnthropic(Reply("hi")) as fake:
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="test")
        ...
        assert fake.requests[0].body["model"] == "claude-sonnet-4-5"
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, Self
from urllib.parse import parse_qsl, urlsplit

from ._replies import ErrorReply, Reply, Scripted, as_script


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as the fake received it. Header names are lower-cased."""

    method: str
    path: str
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: Any
    raw: bytes = b""


@dataclass(frozen=True, slots=True)
class HttpReply:
    """What the handler writes back."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)
    cut_at: int | None = None  # write only this many bytes, then close: a broken stream


class Refusal(Exception):
    """Raised by a fake to answer with an HTTP error (status, JSON body, headers)."""

    def __init__(
        self, status: int, body: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(json.dumps(body))
        self.status = status
        self.body = body
        self.headers = dict(headers or {})


def json_reply(status: int, body: Any, headers: Mapping[str, str] | None = None) -> HttpReply:
    """A JSON response."""
    return HttpReply(status, json.dumps(body).encode(), headers=dict(headers or {}))


def sse_event(data: Any, event: str | None = None) -> str:
    """One server-sent event; ``data`` is JSON-encoded unless already a string."""
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n"


def sse_reply(events: Iterable[str]) -> HttpReply:
    """A complete ``text/event-stream`` response from pre-rendered events."""
    return HttpReply(200, "".join(events).encode(), content_type="text/event-stream")


class FakeServer:
    """Base class: lifecycle, script, recording. Subclasses implement :meth:`handle`
    and :meth:`error_body`.

    Every request is recorded, refused ones included. A request the fake refuses
    (auth, validation) consumes no scripted reply; a scripted :class:`ErrorReply`
    is consumed like any reply. When the script is empty the fake answers 500
    with a message saying so (disable SDK retries in tests: ``max_retries=0``).
    """

    name: ClassVar[str] = "FakeServer"

    def __init__(self, *script: Scripted | str, api_key: str = "test") -> None:
        self.api_key = api_key
        self._script: deque[Scripted] = deque(as_script(script))
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._breaks = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> None:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread."""
        if self._httpd is not None:
            return
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            # A short poll keeps shutdown() (which waits for the loop to notice) fast.
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=self.name,
            daemon=True,
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and release the port."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash, no API version)."""
        if self._httpd is None:
            raise RuntimeError(f"{self.name} is not running; use it as a context manager")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # -- script and records ------------------------------------------------

    def script(self, *replies: Scripted | str) -> None:
        """Append replies (or bare strings, as text replies) to the script."""
        with self._lock:
            self._script.extend(as_script(replies))

    def fail(self, status: int, body: str | Mapping[str, Any] = "", **headers: str) -> None:
        """Script an HTTP error; ``retry_after="2"`` becomes a ``retry-after`` header."""
        named = {key.replace("_", "-"): value for key, value in headers.items()}
        self.script(ErrorReply(status, body, named))

    def break_next_stream(self) -> None:
        """Cut the next streamed reply halfway and close the connection, as a
        network failure would (the declared length promises more)."""
        with self._lock:
            self._breaks += 1

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, refused ones included."""
        with self._lock:
            return list(self._requests)

    @property
    def last_body(self) -> Any:
        """The parsed JSON body of the latest request."""
        return self.requests[-1].body

    @property
    def pending(self) -> int:
        """How many scripted replies are left."""
        with self._lock:
            return len(self._script)

    def next_reply(self, request: RecordedRequest) -> Reply:
        """Pop the next scripted reply; scripted errors and an empty script refuse."""
        with self._lock:
            item = self._script.popleft() if self._script else None
            number = len(self._requests)
        if item is None:
            message = (
                f"{self.name}: script exhausted, no scripted reply left for request "
                f"#{number} ({request.method} {request.path}); add one with fake.script(...)"
            )
            raise Refusal(500, self.error_body(500, message))
        if isinstance(item, ErrorReply):
            body = item.body
            if isinstance(body, str):
                body = self.error_body(item.status, body)
            raise Refusal(item.status, body, item.headers)
        return item

    # -- subclass hooks ----------------------------------------------------

    def handle(self, request: RecordedRequest) -> HttpReply:
        """Answer one request (raise :class:`Refusal` to answer with an error)."""
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        """The provider's error envelope for ``status`` and ``message``."""
        return {"error": {"code": status, "message": message}}

    def _serve(self, request: RecordedRequest) -> HttpReply:
        with self._lock:
            self._requests.append(request)
        try:
            reply = self.handle(request)
        except Refusal as refusal:
            return json_reply(refusal.status, refusal.body, refusal.headers)
        if reply.content_type == "text/event-stream":
            with self._lock:
                broken, self._breaks = self._breaks > 0, max(self._breaks - 1, 0)
            if broken:
                return replace(reply, cut_at=len(reply.body) // 2)
        return reply


def _make_handler(fake: FakeServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self._answer()

        def do_GET(self) -> None:
            self._answer()

        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = None
            split = urlsplit(self.path)
            request = RecordedRequest(
                method=self.command,
                path=split.path,
                query=dict(parse_qsl(split.query)),
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                raw=raw,
            )
            reply = fake._serve(request)
            self.send_response(reply.status)
            self.send_header("content-type", reply.content_type)
            self.send_header("content-length", str(len(reply.body)))
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            if reply.cut_at is None:
                self.wfile.write(reply.body)
                return
            self.wfile.write(reply.body[: reply.cut_at])
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler
