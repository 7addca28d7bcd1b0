"""A strict loopback fake of Slack's Web API ``chat.postMessage`` (``/api/chat.postMessage``).

Like Slack it answers HTTP 200 with ``{"ok": false, "error": ...}`` for
refusals: ``not_authed`` (no token), ``invalid_auth`` (another token),
``channel_not_found`` (a channel it was not told of, or none), ``no_text``,
``msg_too_long`` (over 40,000 characters), ``unknown_method``; a scripted
rate limit is HTTP 429 with ``Retry-After``, for every thread or for one
(``thread_ts``). :meth:`FakeSlack.hold` keeps the next posts unanswered until
:meth:`FakeSlack.release` (a post in flight when its poster is killed). Posts
it accepts are kept in :attr:`FakeSlack.posts`; :meth:`FakeSlack.wait_for_posts`
waits for them, :meth:`FakeSlack.wait_for_requests` for calls of any outcome.

Example::

    with FakeSlack(token="xoxb-1", channels=["C1"]) as fake:
        client = AsyncWebClient(token="xoxb-1", base_url=fake.api_url)
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from ._server import FakeServer, HttpReply, RecordedRequest, json_reply

MAX_TEXT = 40_000


@dataclass(frozen=True, slots=True)
class SlackPost:
    """A message the fake accepted."""

    channel: str
    thread_ts: str | None
    text: str
    ts: str


class FakeSlack(FakeServer):
    name = "FakeSlack"

    def __init__(self, token: str = "xoxb-test", channels: tuple[str, ...] = ("C1",)) -> None:
        super().__init__(api_key=token)
        self.channels = set(channels)
        self.posts: list[SlackPost] = []
        # (status, body, headers, answered once this many posts were accepted,
        #  the thread it is for or None for any)
        self._failures: deque[tuple[int, dict[str, Any], dict[str, str], int, str | None]] = deque()
        self._posted = threading.Condition()
        self._calls = 0
        self._open = threading.Event()
        self._open.set()
        self._drop_held = False

    @property
    def api_url(self) -> str:
        """The Web API base URL to give ``slack_sdk`` (``.../api/``)."""
        return self.base_url + "/api/"

    def rate_limit(
        self, retry_after: int = 0, times: int = 1, thread_ts: str | None = None
    ) -> None:
        """The next ``times`` calls (to ``thread_ts`` only, when given) answer HTTP 429
        with ``Retry-After``."""
        for _ in range(times):
            body = {"ok": False, "error": "ratelimited"}
            headers = {"retry-after": str(retry_after)}
            self._failures.append((429, body, headers, 0, thread_ts))

    def hold(self) -> None:
        """Answer no call until :meth:`release` (each held call waits at most 60 s)."""
        self._drop_held = False
        self._open.clear()

    def release(self, drop: bool = False) -> None:
        """Answer the held calls; ``drop``: with a 503, posting nothing (their caller
        is gone, and Slack never got them)."""
        self._drop_held = drop
        self._open.set()

    def refuse(self, error: str, times: int = 1, after_posts: int = 0) -> None:
        """``times`` calls answer ``{"ok": false, "error": error}``, once ``after_posts``
        posts were accepted."""
        for _ in range(times):
            self._failures.append((200, {"ok": False, "error": error}, {}, after_posts, None))

    def wait_for_posts(self, count: int, timeout: float = 10.0) -> list[SlackPost]:
        """The accepted posts once there are at least ``count`` (AssertionError on timeout)."""
        with self._posted:
            if not self._posted.wait_for(lambda: len(self.posts) >= count, timeout):
                raise AssertionError(f"FakeSlack got {len(self.posts)} posts, not {count}")
            return list(self.posts)

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> None:
        """Return once ``count`` calls were received, answered or not (AssertionError on
        timeout)."""
        with self._posted:
            if not self._posted.wait_for(lambda: self._calls >= count, timeout):
                raise AssertionError(f"FakeSlack got {self._calls} calls, not {count}")

    def handle(self, request: RecordedRequest) -> HttpReply:
        if request.path != "/api/chat.postMessage":
            return json_reply(200, {"ok": False, "error": "unknown_method"})
        authorization = request.headers.get("authorization", "")
        if not authorization.startswith("Bearer "):
            return json_reply(200, {"ok": False, "error": "not_authed"})
        if authorization != f"Bearer {self.api_key}":
            return json_reply(200, {"ok": False, "error": "invalid_auth"})
        with self._posted:
            self._calls += 1
            self._posted.notify_all()
        if not self._open.is_set():
            self._open.wait(60)
            if self._drop_held:
                return json_reply(503, {"ok": False, "error": "service_unavailable"})
        args = request.body if isinstance(request.body, dict) else _form(request.raw)
        failure = self._failure_for(args.get("thread_ts"))
        if failure is not None:
            return failure
        return self._post(args)

    def _failure_for(self, thread_ts: Any) -> HttpReply | None:
        """The first scripted failure that applies to this call, taken off the script."""
        with self._posted:
            for failure in self._failures:
                status, body, headers, after_posts, thread = failure
                if thread is not None and thread != thread_ts:
                    continue
                if len(self.posts) < after_posts:
                    return None  # failures in order: later ones wait for this one
                self._failures.remove(failure)
                return json_reply(status, body, headers)
        return None

    def _post(self, args: dict[str, Any]) -> HttpReply:
        channel, text = args.get("channel"), args.get("text")
        if not channel or channel not in self.channels:
            return json_reply(200, {"ok": False, "error": "channel_not_found"})
        if not isinstance(text, str) or not text.strip():
            return json_reply(200, {"ok": False, "error": "no_text"})
        if len(text) > MAX_TEXT:
            return json_reply(200, {"ok": False, "error": "msg_too_long"})
        with self._posted:
            ts = f"1700000000.{len(self.posts) + 1:06d}"
            self.posts.append(SlackPost(channel, args.get("thread_ts"), text, ts))
            self._posted.notify_all()
        message = {"type": "message", "text": text, "ts": ts, "thread_ts": args.get("thread_ts")}
        return json_reply(200, {"ok": True, "channel": channel, "ts": ts, "message": message})


def _form(raw: bytes) -> dict[str, Any]:
    try:
        return dict(parse_qsl(raw.decode()))
    except UnicodeDecodeError:
        return {}
