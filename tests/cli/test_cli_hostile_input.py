"""Odd paths and odd stdin at the command line: one line on stderr, exit 2, no traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes import ErrorReply, FakeAnthropic, Reply
from turnkit.cli import main

MODEL = "anthropic:claude-sonnet-4-6"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


def _fifo(tmp_path: Path) -> str:
    path = tmp_path / "pipe.png"
    os.mkfifo(path)
    return str(path)


def _socket(tmp_path: Path) -> str:
    path = tmp_path / "s.png"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(path))
    listener.close()
    return str(path)


def _too_big(tmp_path: Path) -> str:
    path = tmp_path / "big.png"
    with path.open("wb") as file:
        file.truncate(21 * 1024 * 1024)  # sparse: no disk used
    return str(path)


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda tmp: "/tmp/" + "x" * 5000 + ".png", "File name too long"),
        (lambda tmp: "~no_such_user_turnkit/a.png", "--image ~no_such_user_turnkit/a.png:"),
        (lambda tmp: "/dev/zero", "not a regular file"),
        (lambda tmp: str(tmp), "not a regular file"),
        (_fifo, "not a regular file"),
        (_socket, "not a regular file"),
        (_too_big, "larger than 20971520 bytes"),
        (lambda tmp: "a\0b.png", "--image a"),
        (lambda tmp: str(tmp / "missing" / "x.png"), "no such file"),
        (lambda tmp: "/proc/self/mem", "Input/output error"),  # a file no read can serve
    ],
    ids=[
        "too-long",
        "no-such-user",
        "dev-zero",
        "directory",
        "fifo",
        "socket",
        "huge",
        "nul",
        "missing",
        "proc-mem",
    ],
)
def test_odd_image_paths_give_one_line_and_exit_2(
    make: object, problem: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    code = main(["run", "look", "--image", path, "--model", MODEL])
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("turnkit: error: --image"), err
    assert problem in lines[0]


def _turnkit(*args: str, stdin: bytes, base_url: str) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env |= {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": "test"}
    return subprocess.run(
        [sys.executable, "-m", "turnkit", *args],
        capture_output=True,
        env=env,
        input=stdin,
        timeout=120,
    )


@pytest.mark.parametrize("stdin", [b"\xff\xfe\x00binary\n", b"hello \xc3(\n"])
def test_chat_with_undecodable_stdin_gives_one_line_and_exit_2(
    stdin: bytes, fake: FakeAnthropic
) -> None:
    done = _turnkit("chat", "--model", MODEL, stdin=stdin, base_url=fake.base_url)
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 2, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == "turnkit: error: standard input is not UTF-8 text"


def test_chat_exits_non_zero_when_the_input_ends_after_a_failed_turn(fake: FakeAnthropic) -> None:
    fake.script(Reply("Hello."), ErrorReply(400, "prompt is too long"))
    done = _turnkit("chat", "--model", MODEL, stdin=b"hi\nagain\n", base_url=fake.base_url)
    assert done.returncode == 1
    assert b"prompt is too long" in done.stderr


def test_chat_exits_zero_when_the_last_turn_succeeded(fake: FakeAnthropic) -> None:
    fake.script(ErrorReply(400, "prompt is too long"), Reply("Fine now."))
    done = _turnkit("chat", "--model", MODEL, stdin=b"hi\nagain\n", base_url=fake.base_url)
    assert done.returncode == 0, done.stderr
    assert b"Fine now." in done.stdout
