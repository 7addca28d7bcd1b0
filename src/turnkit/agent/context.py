"""RunContext and the ``before_run`` / ``after_run`` hooks.

``before_run`` sees a copy of the run's input and may replace the messages,
the prompt (the text of the latest user message), or both. Rewrites apply to
this run's input only: never to the caller's data, nor to what ``prompt()``
keeps in history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from turnkit._sync import maybe_await
from turnkit.errors import InvalidMessageError
from turnkit.messages import Message, TextBlock, validate_messages
from turnkit.messages.checks import kind_of

__all__ = [
    "RunContext",
    "apply_after_run",
    "apply_before_run",
    "before_run_changes",
    "hook_prompt",
    "latest_prompt",
    "replace_prompt",
]

_FIELDS = frozenset({"messages", "prompt"})


@dataclass(slots=True)
class RunContext:
    """What the hooks of a run see.

    - ``messages``: the run's whole input, as a new list (messages are
      immutable, so nothing a hook does to it reaches the caller or history).
    - ``prompt``: the text blocks of the latest user message joined with ""
      ("" for an image-only turn).
    - ``agent_name``, ``invocation_id``: which agent, and which run.

    ``before_run`` may return None (no change), this ctx (its ``messages`` and
    ``prompt`` are read back), or a dict of the fields to change:
    ``{"messages": [...], "prompt": "..."}``.
    """

    messages: list[Message]
    prompt: str
    agent_name: str = ""
    invocation_id: str = ""


def latest_prompt(messages: Sequence[Message]) -> str:
    """The text of the latest user message ("" when there is none)."""
    for message in reversed(messages):
        if message.role == "user":
            return message.text
    return ""


def replace_prompt(messages: Sequence[Message], text: str) -> tuple[Message, ...]:
    """``messages`` with the latest user message's text blocks replaced by ``text``.

    One text block takes the place of the first one (keeping its ``cache``),
    or is prepended when there was none; other blocks keep their order. With
    no user message at all, a user message holding ``text`` is appended.
    """
    out = list(messages)
    for index in range(len(out) - 1, -1, -1):
        message = out[index]
        if message.role != "user":
            continue
        texts = [i for i, b in enumerate(message.content) if type(b) is TextBlock]
        first = texts[0] if texts else 0
        cache = message.content[first].cache if texts else None  # type: ignore[union-attr]
        others = [b for b in message.content if type(b) is not TextBlock]
        position = sum(1 for b in message.content[:first] if type(b) is not TextBlock)
        others.insert(position, TextBlock(text, cache))
        out[index] = message.clone(content=tuple(others))
        return tuple(out)
    return (*out, Message.user(text))


def _messages_from(value: object, path: str) -> tuple[Message, ...]:
    messages = validate_messages(value, path=path)
    if not messages:
        raise InvalidMessageError(path, "expected at least one message")
    return messages


async def before_run_changes(hook: Any, ctx: RunContext) -> Mapping[str, Any]:
    """Run ``before_run`` and return the fields it set, as given ({} for none).

    Raises TypeError for a return value of the wrong kind or unknown fields.
    """
    returned = await maybe_await(hook(ctx))
    if returned is None:
        return {}
    if returned is ctx:
        return {"messages": ctx.messages, "prompt": ctx.prompt}
    if isinstance(returned, Mapping):
        unknown = set(returned) - _FIELDS
        if unknown:
            raise TypeError(f"before_run returned unknown fields {sorted(unknown)}")
        return returned
    raise TypeError(
        f"before_run must return None, the ctx, or a dict of fields, got {kind_of(returned)}"
    )


def hook_prompt(changes: Mapping[str, Any], received: str) -> str:
    """The prompt after ``before_run``: the one it set, else ``received``."""
    prompt = changes.get("prompt", received)
    if not isinstance(prompt, str):
        raise InvalidMessageError(
            "before_run().prompt", f"expected a string, got {kind_of(prompt)}"
        )
    return prompt


async def apply_before_run(hook: Any, ctx: RunContext) -> tuple[Message, ...]:
    """Run ``before_run`` and return the run's input as it changed it."""
    received = ctx.prompt
    original = tuple(ctx.messages)
    changes = await before_run_changes(hook, ctx)
    if not changes:
        return original
    messages = original
    if "messages" in changes:
        messages = _messages_from(changes["messages"], "before_run().messages")
    prompt = hook_prompt(changes, received)
    if prompt != received:
        messages = replace_prompt(messages, prompt)
    return messages


async def apply_after_run(hook: Any, ctx: RunContext, result: Any) -> Any:
    """Run ``after_run``; its RunResult replaces ``result``, None keeps it."""
    from turnkit.agent.results import RunResult

    returned = await maybe_await(hook(ctx, result))
    if returned is None:
        return result
    if not isinstance(returned, RunResult):
        raise TypeError(f"after_run must return None or a RunResult, got {kind_of(returned)}")
    if type(returned.messages) is not tuple or not all(
        type(m) is Message for m in returned.messages
    ):
        messages = validate_messages(returned.messages, path="after_run().messages")
        returned = replace(returned, messages=messages)
    return returned
