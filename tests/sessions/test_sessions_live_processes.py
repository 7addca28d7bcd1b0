"""Live output across processes: a worker process streams, another follows over SSE."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from server.conftest import API_KEY, serving
from turnkit.cli.serve import load_app

ANSWER = "Streaming from the worker process, three characters at a time."  # live_app.py
HERE = Path(__file__).parent
SRC = str(Path(__file__).parents[2] / "src")


@pytest.fixture
def worker(any_db_url: str) -> Iterator[str]:
    """``turnkit worker`` running the live app's turns on the test's database."""
    env = {
        **os.environ,
        "LIVE_TEST_DB": any_db_url,
        "ROLE": "worker",
        "PYTHONPATH": os.pathsep.join([SRC, *sys.path]),
    }
    command = [sys.executable, "-m", "turnkit", "worker", str(HERE / "live_app.py")]
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(
            "turnkit worker: running turns of agents writer as executor "
        )
        yield any_db_url
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


def sse(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Server-sent events as {event, data, id} (id None when the event has none)."""
    event: dict[str, Any] = {}
    for line in lines:
        if not line:
            if "data" in event:
                yield event
            event = {}
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            event[name] = value.removeprefix(" ")


def follower_app(url: str) -> Any:
    os.environ["LIVE_TEST_DB"] = url
    try:
        return load_app(f"{HERE / 'live_app.py'}:app")
    finally:
        del os.environ["LIVE_TEST_DB"]


def test_a_follower_in_another_process_sees_the_workers_deltas_over_sse(worker: str) -> None:
    app = follower_app(worker)  # runs no turns: the worker process does
    auth = {"Authorization": f"Bearer {API_KEY}"}
    with serving(app) as base, httpx2.Client(base_url=base, headers=auth, timeout=30) as http:
        sid = http.post("/sessions", json={"agent": "writer"}).json()["id"]
        http.post(f"/sessions/{sid}/turns", json={"input": {"text": "Go"}})
        got = []
        headers = {"Accept": "text/event-stream"}
        url = f"/sessions/{sid}/events?live=true"
        with http.stream("GET", url, headers=headers) as stream:
            for event in sse(stream.iter_lines()):
                got.append(event)
                if event["event"] in ("turn.completed", "turn.failed"):
                    break
    deltas = [e for e in got if e["event"] == "text.delta"]
    assert len(deltas) > 3  # it arrived in pieces
    assert all("id" not in e for e in deltas)  # Last-Event-ID stays a durable seq
    assert "".join(json.loads(e["data"])["data"]["text"] for e in deltas) == ANSWER
    durable = [e for e in got if "id" in e]
    assert [int(e["id"]) for e in durable] == list(range(1, len(durable) + 1))
    message = next(e for e in reversed(durable) if e["event"] == "message")
    assert got.index(deltas[-1]) < got.index(message)
    assert json.loads(message["data"])["data"]["message"]["content"][0]["text"] == ANSWER
