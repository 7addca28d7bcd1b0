"""Views of a message: a readable text body, and a collapsed form for models."""

from __future__ import annotations

import json

from turnkit.messages._json import thaw
from turnkit.messages.blocks import (
    Block,
    FileBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    UrlSource,
)
from turnkit.messages.message import Message

__all__ = ["collapse_for_llm", "message_text_body"]


def message_text_body(message: Message) -> str:
    """The message as plain text for people (logs, CLIs), not for providers.

    Text as is; thinking as ``<thinking>\\n...\\n</thinking>``; images as
    ``[image] <url or media type>``; tool calls as ``-> tool_call(name): <json>``;
    tool results as ``<- tool_result(id): ...``. Blocks are joined with newlines.
    """
    return "\n".join(_block_text(block) for block in message.content)


def _block_text(block: Block) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, ThinkingBlock):
        return f"<thinking>\n{block.thinking}\n</thinking>"
    if isinstance(block, ImageBlock):
        return f"[image] {_where(block)}"
    if isinstance(block, FileBlock):
        return f"[file] {block.filename}"
    if isinstance(block, ToolUseBlock):
        return f"-> tool_call({block.name}): {json.dumps(thaw(block.input), ensure_ascii=False)}"
    content = block.content
    body = content if isinstance(content, str) else "\n".join(_block_text(p) for p in content)
    return f"<- tool_result({block.tool_use_id}): {body}"


def _where(block: ImageBlock) -> str:
    source = block.source
    return source.url if isinstance(source, UrlSource) else source.media_type


def collapse_for_llm(message: Message, include_thinking: bool = False) -> Message:
    """Join adjacent text blocks with "\\n" and drop thinking (unless asked).

    The joined block keeps the first block's ``cache``. Images, files and tool
    blocks stay where they are. Returns ``message`` itself when nothing changes.
    """
    blocks: list[Block] = []
    run: list[TextBlock] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            run.append(block)
            continue
        if isinstance(block, ThinkingBlock) and not include_thinking:
            continue
        _flush(run, blocks)
        blocks.append(block)
    _flush(run, blocks)
    content = tuple(blocks)
    return message if content == message.content else message.clone(content=content)


def _flush(run: list[TextBlock], blocks: list[Block]) -> None:
    if len(run) == 1:
        blocks.append(run[0])
    elif run:
        blocks.append(TextBlock("\n".join(b.text for b in run), run[0].cache))
    run.clear()
