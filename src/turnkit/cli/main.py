"""Argument parsing and the commands."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from turnkit.cli.inputs import UsageError, prompt_blocks
from turnkit.cli.output import Printer, result_json
from turnkit.errors import InvalidMessageError, ModelNotFoundError, UnsupportedContentError

if TYPE_CHECKING:
    from turnkit.agent import Agent, RunResult

__all__ = ["main"]

DEFAULT_MODEL = "local"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (also used as the script's)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.handler(args)
    except (UsageError, InvalidMessageError, ModelNotFoundError, UnsupportedContentError) as err:
        print(f"turnkit: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="turnkit", description="LLM agents from the shell.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser("run", help="answer one prompt")
    run.add_argument("prompt", help="what to ask")
    run.add_argument("--image", action="append", default=[], metavar="PATH_OR_URL")
    _model_options(run)
    run.add_argument("--json", action="store_true", help="print the RunResult as JSON")
    run.set_defaults(handler=_run)

    chat = commands.add_parser("chat", help="talk with a model, keeping history")
    _model_options(chat)
    chat.set_defaults(handler=_chat)

    models = commands.add_parser("models", help="list the models and keys configured here")
    models.add_argument("--json", action="store_true")
    models.set_defaults(handler=_models)

    from turnkit.cli.serve import add_commands

    add_commands(commands)
    return parser


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model string (default: local)")
    parser.add_argument("--system", default=None, help="system prompt")


def _agent(args: argparse.Namespace) -> Agent:
    from turnkit.agent import Agent, AgentConfig
    from turnkit.providers import resolve_model

    return Agent(AgentConfig("cli", model=resolve_model(args.model), system=args.system))


def _run(args: argparse.Namespace) -> int:
    from turnkit.messages import Message

    blocks = prompt_blocks(args.prompt, args.image)
    agent = _agent(args)
    if args.json:
        result = agent.run_sync([Message("user", blocks)])
        print(json.dumps(result_json(result), ensure_ascii=False, indent=2))
    else:
        result = asyncio.run(Printer().stream(agent.stream([Message("user", blocks)])))
    return _exit_code(result)


def _chat(args: argparse.Namespace) -> int:
    from turnkit.messages import Message

    agent = _agent(args)
    printer = Printer()
    printer.note(
        f"Chatting with {agent._resolved_model().id}. /reset clears, /exit or Ctrl-D quits."
    )
    last: RunResult | None = None
    while True:
        try:
            line = _text(input("you> "))
        except UnicodeDecodeError:  # a strict stdin
            raise UsageError("standard input is not UTF-8 text") from None
        except EOFError:  # the input ended: the exit code tells how the last turn went
            return 0 if last is None else _exit_code(last)
        if line.strip() in ("/exit", "/quit"):
            return 0
        if line.strip() == "/reset":
            agent, last = _agent(args), None
            continue
        if not line.strip():
            continue
        turn = Message.user(line)
        last = asyncio.run(printer.stream(agent.stream([*agent.get_history(), turn])))
        if last.success:
            for message in (turn, *last.messages):
                agent.add_message(message)


def _text(line: str) -> str:
    """A line of stdin, refused unless it was UTF-8 (stdin may decode with surrogateescape)."""
    try:
        line.encode()
    except UnicodeEncodeError:
        raise UsageError("standard input is not UTF-8 text") from None
    return line


def _models(args: argparse.Namespace) -> int:
    from turnkit.cli.models import configured_models

    rows = configured_models()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        Printer().table(rows)
    return 0


def _exit_code(result: RunResult) -> int:
    if result.success:
        return 0
    if isinstance(result.exception, (UnsupportedContentError, InvalidMessageError)):
        return 2
    return 1
