"""Input checks of the Agent entry points, done before anything else happens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from turnkit.agent.approvals import Approval, approval_decisions, decide, pending_calls
from turnkit.errors import InvalidMessageError
from turnkit.messages import (
    Block,
    FileBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    validate_blocks,
    validate_messages,
)
from turnkit.messages.checks import kind_of
from turnkit.tools import Tool

__all__ = ["approvals_input", "message_input", "prompt_blocks", "run_input"]

_USER_BLOCKS = (TextBlock, ImageBlock, FileBlock, ToolResultBlock)


def run_input(value: object) -> tuple[Message, ...]:
    """``run()``/``stream()`` input: a str, or a non-empty list of messages."""
    if isinstance(value, str):
        return (Message("user", (_text(value),)),)
    if not isinstance(value, (list, tuple)):
        problem = f"expected a string or a list of messages, got {kind_of(value)}"
        raise InvalidMessageError("input", problem)
    messages = validate_messages(value, path="messages")
    if not messages:
        raise InvalidMessageError("messages", "expected at least one message")
    return messages


def prompt_blocks(value: object) -> tuple[Block, ...]:
    """``prompt()`` input: a str, or a non-empty list of user content blocks."""
    if isinstance(value, str):
        return (_text(value),)
    if not isinstance(value, (list, tuple)):
        problem = f"expected a string or a list of content blocks, got {kind_of(value)}"
        raise InvalidMessageError("input", problem)
    blocks = validate_blocks(value, path="blocks")
    if not blocks:
        raise InvalidMessageError("blocks", "expected at least one content block")
    for index, block in enumerate(blocks):
        if not isinstance(block, _USER_BLOCKS):
            problem = f"a {block.type} block is not allowed in a user message"
            raise InvalidMessageError(f"blocks[{index}]", problem)
    return blocks


def _text(value: str) -> TextBlock:
    """A str input as a text block; its problems are named at ``input``."""
    try:
        return TextBlock(value)
    except InvalidMessageError as err:
        raise InvalidMessageError("input", err.problem) from None


def message_input(value: object) -> Message:
    """``add_message()`` input: one message, as a dict or a Message."""
    if isinstance(value, Message):
        return value
    if not isinstance(value, Mapping):
        raise InvalidMessageError("message", f"expected a message object, got {kind_of(value)}")
    try:
        return Message.from_dict(value)
    except InvalidMessageError as err:
        raise err.within("message") from None


def history_input(value: Any) -> list[Message]:
    """``AgentConfig.history``: a list of messages, copied."""
    return list(validate_messages(value, path="history"))


def approvals_input(
    approvals: object, messages: Sequence[Message], tools: Mapping[str, Tool]
) -> dict[str, Approval] | None:
    """``approvals=`` of ``run()``/``stream()``/``continue_run()``, checked against
    the calls held at the end of ``messages`` before anything runs (None: none given)."""
    if approvals is None:
        return None
    decisions = approval_decisions(approvals)
    pending = pending_calls(messages)
    decide(() if pending is None else pending.calls, decisions, tools)
    return decisions
