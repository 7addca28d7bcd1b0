"""The shared fake-server base: lifecycle, script, recording, SSE helpers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from . import FakeAnthropic, FakeGemini, FakeOpenAIChat, FakeOpenAIResponses, Reply, Text
from ._server import sse_event


def post(url: str, body: object, **headers: str) -> tuple[int, dict[str, object]]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"content-type": "application/json", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_base_url_needs_a_running_server() -> None:
    fake = FakeAnthropic()
    with pytest.raises(RuntimeError, match="not running"):
        _ = fake.base_url
    with fake:
        assert fake.base_url.startswith("http://127.0.0.1:")


def test_bare_strings_fail_helper_and_pending() -> None:
    with FakeOpenAIChat("first", Reply([Text("second")])) as fake:
        fake.fail(503, "busy", retry_after="2")
        assert fake.pending == 3
        url = fake.base_url + "/v1/chat/completions"
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        auth = {"authorization": "Bearer test"}
        assert post(url, body, **auth)[1]["choices"][0]["message"]["content"] == "first"  # type: ignore[index]
        assert post(url, body, **auth)[1]["choices"][0]["message"]["content"] == "second"  # type: ignore[index]
        status, error = post(url, body, **auth)
        assert (status, error["error"]["message"]) == (503, "busy")  # type: ignore[index]
        status, error = post(url, body, **auth)
        assert status == 500 and "script exhausted" in error["error"]["message"]  # type: ignore[index]
        assert [r.body for r in fake.requests] == [body] * 4
        assert fake.requests[0].headers["authorization"] == "Bearer test"


def test_refused_requests_are_recorded_and_do_not_consume_the_script() -> None:
    with FakeOpenAIResponses("kept") as fake:
        status, _ = post(
            fake.base_url + "/v1/responses",
            {
                "model": "m",
                "input": [{"type": "function_call_output", "call_id": "x", "output": ""}],
            },
            authorization="Bearer test",
        )
        assert status == 400
        assert fake.pending == 1 and len(fake.requests) == 1


def test_unknown_paths_are_404_in_the_provider_envelope() -> None:
    with FakeGemini() as fake:
        status, error = post(
            fake.base_url + "/v1beta/models/x:embed", {}, **{"x-goog-api-key": "test"}
        )
        assert status == 404 and error["error"]["status"] == "NOT_FOUND"  # type: ignore[index]


def test_sse_event_format() -> None:
    assert sse_event({"a": 1}, "ping") == 'event: ping\ndata: {"a": 1}\n\n'
    assert sse_event("[DONE]") == "data: [DONE]\n\n"
