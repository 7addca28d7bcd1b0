"""A strict loopback fake of Linear's GraphQL endpoint, for ``agentActivityCreate``.

It refuses as Linear does: no or another token is HTTP 400 with an
``AUTHENTICATION_ERROR``; OAuth tokens must come as ``Bearer``; a query
that is not the ``agentActivityCreate`` mutation, an unknown agent session
or content missing what its type needs (``body``; ``action`` and
``parameter`` for an action) is a GraphQL error with ``INVALID_INPUT``.
Scripted failures: HTTP 5xx, 429 with ``Retry-After``, ``RATELIMITED``, for
any call or for one agent session's calls (``session``).
Accepted activities are kept in :attr:`FakeLinear.activities`.
"""

from __future__ import annotations

import re
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

from ._server import FakeServer, HttpReply, RecordedRequest, json_reply

TYPES = ("thought", "action", "elicitation", "response", "error")
_MUTATION = re.compile(r"^\s*mutation\b[^{]*\{\s*agentActivityCreate\s*\(\s*input\s*:\s*\$input")


@dataclass(frozen=True, slots=True)
class Activity:
    """An agent activity the fake accepted."""

    agent_session_id: str
    content: dict[str, Any]


def _error(message: str, code: str, status: int = 200) -> HttpReply:
    body = {"errors": [{"message": message, "extensions": {"code": code}}], "data": None}
    return json_reply(status, body)


class FakeLinear(FakeServer):
    name = "FakeLinear"

    def __init__(self, token: str = "lin_oauth_test", sessions: tuple[str, ...] = ()) -> None:
        super().__init__(api_key=token)
        self.sessions = set(sessions)
        self.activities: list[Activity] = []
        self._failures: deque[tuple[HttpReply, str | None]] = deque()  # (reply, session)
        self._created = threading.Condition()

    @property
    def api_url(self) -> str:
        return self.base_url + "/graphql"

    def fail_with_status(
        self,
        status: int,
        times: int = 1,
        retry_after: str | None = None,
        session: str | None = None,
    ) -> None:
        """The next ``times`` calls (for agent session ``session`` only, when given)
        answer HTTP ``status``."""
        headers = {} if retry_after is None else {"retry-after": retry_after}
        for _ in range(times):
            reply = json_reply(status, {"errors": [{"message": "busy"}]}, headers)
            self._failures.append((reply, session))

    def rate_limit(self, times: int = 1) -> None:
        for _ in range(times):
            self._failures.append((_error("Rate limit exceeded", "RATELIMITED", 400), None))

    def wait_for_activities(self, count: int, timeout: float = 10.0) -> list[Activity]:
        with self._created:
            if not self._created.wait_for(lambda: len(self.activities) >= count, timeout):
                raise AssertionError(f"FakeLinear got {len(self.activities)} activities")
            return list(self.activities)

    def handle(self, request: RecordedRequest) -> HttpReply:
        if request.path != "/graphql" or request.method != "POST":
            return json_reply(404, {"errors": [{"message": "Not found"}]})
        expected = self.api_key if self.api_key.startswith("lin_api_") else f"Bearer {self.api_key}"
        if request.headers.get("authorization") != expected:
            return _error("Authentication required, not authenticated", "AUTHENTICATION_ERROR", 400)
        body = request.body if isinstance(request.body, dict) else {}
        failure = self._failure_for(body)
        if failure is not None:
            return failure
        if not isinstance(body.get("query"), str) or not _MUTATION.match(body["query"]):
            return _error("Only the agentActivityCreate mutation is served here", "INVALID_INPUT")
        data = (body.get("variables") or {}).get("input")
        problem = self._problem(data)
        if problem is not None:
            return _error(problem, "INVALID_INPUT")
        with self._created:
            self.activities.append(Activity(data["agentSessionId"], data["content"]))
            number = len(self.activities)
            self._created.notify_all()
        created = {"success": True, "agentActivity": {"id": f"activity-{number}"}}
        return json_reply(200, {"data": {"agentActivityCreate": created}})

    def _failure_for(self, body: dict[str, Any]) -> HttpReply | None:
        """The first scripted failure that applies to this call, taken off the script."""
        data = (body.get("variables") or {}).get("input")
        session = data.get("agentSessionId") if isinstance(data, dict) else None
        with self._created:
            for failure in self._failures:
                if failure[1] is None or failure[1] == session:
                    self._failures.remove(failure)
                    return failure[0]
        return None

    def _problem(self, data: Any) -> str | None:
        if not isinstance(data, dict):
            return "Variable $input of required type AgentActivityCreateInput! was not provided."
        if data.get("agentSessionId") not in self.sessions:
            return "Entity not found: AgentSession"
        content = data.get("content")
        if not isinstance(content, dict) or content.get("type") not in TYPES:
            return "content.type must be one of " + ", ".join(TYPES)
        if content["type"] == "action":
            if not all(isinstance(content.get(k), str) for k in ("action", "parameter")):
                return "an action needs action and parameter"
        elif not isinstance(content.get("body"), str) or not content["body"].strip():
            return f"a {content['type']} needs a body"
        return None
