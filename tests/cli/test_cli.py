"""The ``turnkit`` command line, run as a user runs it: a subprocess."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes import ErrorReply, FakeAnthropic, Reply

MODEL = "anthropic:claude-sonnet-4-6"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


def turnkit(
    *args: str, base_url: str | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    if base_url:
        env |= {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": "test"}
    return subprocess.run(
        [sys.executable, "-m", "turnkit", *args],
        capture_output=True,
        text=True,
        env=env,
        input=stdin,
        timeout=120,
    )


def test_run_streams_the_answer_and_prints_usage(fake: FakeAnthropic) -> None:
    fake.script(Reply("Paris is the capital.", usage=(9, 5)))
    done = turnkit("run", "Capital of France?", "--model", MODEL, base_url=fake.base_url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Paris is the capital."
    assert "9 tokens in, 5 out" in done.stderr
    assert fake.last_body["messages"][0]["content"][0]["text"] == "Capital of France?"


def test_run_json_prints_the_run_result(fake: FakeAnthropic, tmp_path: Path) -> None:
    image = tmp_path / "dot.png"
    image.write_bytes(PNG)
    fake.script(Reply("A dot."))
    done = turnkit(
        "run",
        "What is this?",
        "--image",
        str(image),
        "--system",
        "Be terse.",
        "--model",
        MODEL,
        "--json",
        base_url=fake.base_url,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["success"] is True and result["output"] == "A dot."
    assert result["messages"][0]["role"] == "assistant"
    sent = fake.last_body
    assert sent["system"] == "Be terse."
    assert sent["messages"][0]["content"][1]["source"]["media_type"] == "image/png"


def test_provider_failure_exits_1(fake: FakeAnthropic) -> None:
    fake.script(ErrorReply(400, "prompt is too long"))
    done = turnkit("run", "hi", "--model", MODEL, base_url=fake.base_url)
    assert done.returncode == 1
    assert "prompt is too long" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("run", "hi", "--image", "/no/such.png", "--model", MODEL),
            "--image /no/such.png: no such file",
        ),
        (("run", "hi", "--model", "nonsense:x"), "unknown model 'nonsense:x'"),
        (
            ("run", "hi", "--image", "ftp://x/y.png", "--model", MODEL),
            "not an absolute http(s) URL",
        ),
        (("run", "  ", "--model", MODEL), "the prompt is empty"),
    ],
)
def test_bad_input_exits_2_with_one_line(args: tuple[str, ...], message: str) -> None:
    done = turnkit(*args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in done.stderr


def test_unknown_command_is_usage_error() -> None:
    assert turnkit("fly").returncode == 2


def test_chat_keeps_history_across_turns(fake: FakeAnthropic) -> None:
    fake.script(Reply("Hello Ada."), Reply("Your name is Ada."))
    done = turnkit("chat", "--model", MODEL, base_url=fake.base_url, stdin="I am Ada\nWho am I?\n")
    assert done.returncode == 0, done.stderr
    assert "Your name is Ada." in done.stdout
    roles = [m["role"] for m in fake.last_body["messages"]]
    assert roles == ["user", "assistant", "user"]


def test_models_lists_providers_and_keys() -> None:
    done = turnkit("models", "--json")
    rows = {row["model"]: row for row in json.loads(done.stdout)}
    assert rows["anthropic:<model>"]["key"] == "missing"
    assert rows["local"]["base_url"] == "embedded"
