"""``turnkit serve app.py[:app]`` (the HTTP API) and ``turnkit worker app.py[:app]`` (turns only).

The target names a Python file (or an importable module) and the App in it:
``app.py`` uses the variable ``app``; ``app.py:support`` another name.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import importlib.util
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from turnkit.cli.inputs import UsageError

__all__ = ["add_commands", "load_app"]


def add_commands(commands: Any) -> None:
    """Add ``serve`` and ``worker`` to the command line's subcommands."""
    serve = commands.add_parser("serve", help="serve an App over HTTP (FastAPI + uvicorn)")
    serve.add_argument("target", metavar="APP", help="app.py[:name] or module[:name]")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--api-key", default=None, help="bearer key clients must send (default: $TURNKIT_API_KEY)"
    )
    serve.add_argument(
        "--no-turns",
        action="store_true",
        help="accept inputs and stream events, run no turns here (workers run them)",
    )
    serve.set_defaults(handler=_serve)
    worker = commands.add_parser("worker", help="run an App's turns, without HTTP")
    worker.add_argument("target", metavar="APP", help="app.py[:name] or module[:name]")
    worker.set_defaults(handler=_worker)
    status = commands.add_parser("status", help="list the executors on an App's database")
    status.add_argument("target", metavar="APP", help="app.py[:name] or module[:name]")
    status.add_argument("--json", action="store_true")
    status.set_defaults(handler=_status)


def load_app(target: str) -> Any:
    """The App named by ``target`` (``path.py[:name]`` or ``module[:name]``)."""
    from turnkit.sessions import App

    source, _, name = target.partition(":")
    name = name or "app"
    module = _load_module(source)
    found = getattr(module, name, None)
    if not isinstance(found, App):
        apps = [key for key, value in vars(module).items() if isinstance(value, App)]
        hint = f"; it defines {', '.join(apps)}" if apps else "; it defines no turnkit.App"
        raise UsageError(f"{source} has no App named {name!r}{hint}")
    return found


def _load_module(source: str) -> Any:
    path = Path(source)
    if source.endswith(".py") or path.exists():
        if not path.is_file():
            raise UsageError(f"no such file: {source}")
        sys.path.insert(0, str(path.resolve().parent))
        spec = importlib.util.spec_from_file_location(f"turnkit_app_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise UsageError(f"cannot load {source} as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(source)
    except ModuleNotFoundError as err:
        raise UsageError(f"cannot import {source!r}: {err}") from None


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from turnkit.server import check_bind, create_app, resolve_api_key

    api_key = resolve_api_key(args.api_key)
    try:
        check_bind(args.host, api_key)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be 0-65535, got {args.port}")
    app = load_app(args.target)
    if args.no_turns:
        app.set_workers(False)
    try:  # bound here, so the address printed is the real one (port 0 picks a free port)
        sock = socket.create_server((args.host, args.port), family=_family(args.host))
    except OSError as err:
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {err.strerror}") from None
    port = sock.getsockname()[1]
    agents = ", ".join(app.agents) or "none"
    host = f"[{args.host}]" if ":" in args.host else args.host
    guard = "API key required" if api_key else "no API key: loopback only"
    turns = "running turns" if app.runs_turns else "running no turns"
    print(
        f"turnkit: serving agents {agents} at http://{host}:{port} ({guard}) as executor "
        f"{app.executor_id}, {turns}",
        flush=True,
    )
    config = uvicorn.Config(
        create_app(app, api_key), log_level="warning", timeout_graceful_shutdown=5
    )
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises Ctrl-C once it has stopped
        uvicorn.Server(config).run(sockets=[sock])
    print("turnkit: stopped; turns in flight resume at the next start", flush=True)
    return 0


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _worker(args: argparse.Namespace) -> int:
    app = load_app(args.target)
    asyncio.run(_work(app))
    print("turnkit worker: stopped; turns in flight resume at the next start", flush=True)
    return 0


async def _work(app: Any) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with app:
        agents = ", ".join(app.agents) or "none"
        print(
            f"turnkit worker: running turns of agents {agents} as executor {app.executor_id}",
            flush=True,
        )
        await stop.wait()


def _status(args: argparse.Namespace) -> int:
    import dataclasses
    import json
    import time

    from turnkit.sessions.runtime.executors import status_of

    app = load_app(args.target)
    infos = status_of(app.database_url)
    if args.json:
        print(json.dumps([dataclasses.asdict(info) for info in infos], indent=2))
        return 0
    from turnkit.cli.output import Printer

    stamp = time.time()
    rows = [
        {
            "executor": info.id,
            "state": info.state,
            "host": info.host,
            "pid": str(info.pid),
            "turns": f"{info.running}/{info.max_running}" if info.runs_turns else "none",
            "lease": f"{info.lease_until - stamp:+.1f} s",
            "taken by": info.taken_by or "",
        }
        for info in infos
    ]
    if rows:
        Printer().table(rows)
    else:
        print("turnkit: no executors have run on this database yet")
    return 0
