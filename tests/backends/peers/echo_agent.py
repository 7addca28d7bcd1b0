"""A process agent for the ProcessBackend tests: replies ``echo: <prompt>``.

The prompt comes from stdin, or from the last argument with ``--from-arg``.
The reply is written in a few flushed chunks. Flags make it misbehave:
``--stderr TEXT`` writes to stderr, ``--exit CODE`` exits with CODE after
replying, ``--kill-self`` dies of SIGKILL, ``--hang`` stops after the first
chunk and waits forever, ``--spawn-child`` starts a grandchild that waits
forever (to prove the whole process group is killed). ``--report SOCK``
sends JSON lines ({"event": "started" | "hang", "pid", "child"}) to a Unix
socket, so tests wait on events instead of sleeping; ``--touch PATH``
creates PATH first thing (proof that the process started).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path


def main() -> None:
    args = _parser().parse_args()
    if args.touch:
        Path(args.touch).touch()
    child = None
    if args.spawn_child:
        pause = "import signal; signal.pause()"
        child = subprocess.Popen([sys.executable, "-c", pause]).pid
    report = _reporter(args.report, child)
    report("started")
    prompt = args.prompt if args.from_arg else sys.stdin.read()
    _write("echo: ")
    if args.hang:
        report("hang")
        signal.pause()
    half = len(prompt) // 2
    _write(prompt[:half])
    _write(prompt[half:])
    if args.print_cwd:
        _write(f" cwd={os.getcwd()}")
    if args.print_env:
        _write(f" {args.print_env}={os.environ.get(args.print_env)}")
    if args.stderr:
        sys.stderr.write(args.stderr)
        sys.stderr.flush()
    if args.kill_self:
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(args.exit)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    parser.add_argument("--from-arg", action="store_true")
    parser.add_argument("--stderr", default="")
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--kill-self", action="store_true")
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--spawn-child", action="store_true")
    parser.add_argument("--report")
    parser.add_argument("--touch")
    parser.add_argument("--print-cwd", action="store_true")
    parser.add_argument("--print-env")
    parser.add_argument("prompt", nargs="?", default="")
    return parser


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _reporter(path: str | None, child: int | None) -> Callable[[str], None]:
    if path is None:
        return lambda event: None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)

    def report(event: str) -> None:
        line = {"event": event, "pid": os.getpid(), "child": child}
        sock.sendall(json.dumps(line).encode() + b"\n")

    return report


if __name__ == "__main__":
    main()
