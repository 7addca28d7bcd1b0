"""Compaction: the older part of a long conversation summarised into one message.

A conversation grows with every turn; the model's context window does not.
Before a model call whose conversation is estimated over
``Compaction.max_tokens``, everything but the last ``keep_last`` messages is
summarised by a model into one message of type ``compaction``, and the model
sees that summary (as :func:`~turnkit.default_convert_to_llm` turns it into
user text) followed by the messages kept. The next compaction summarises the
previous summary and what followed it, so what the model sees stays bounded
however long the conversation grows, while a stored history keeps every
message, the compaction message in its place (:func:`conversation_view` is
the part a model sees).

:func:`plan_compaction` is the one decision, for every caller: the agent
loop runs it before each model call, durable sessions before each durable
model call, :func:`compact` on a list it is given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from turnkit.errors import ContextTooLongError
from turnkit.messages import (
    FileBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    collapse_for_llm,
    message_text_body,
    validate_messages,
)
from turnkit.providers.base import Model, ModelRequest, ModelSettings, Usage

__all__ = [
    "DEFAULT_INSTRUCTIONS",
    "Compaction",
    "CompactionPlan",
    "TokenReport",
    "compact",
    "conversation_view",
    "cut_index",
    "estimate_tokens",
    "plan_compaction",
]

DEFAULT_INSTRUCTIONS = (
    "Summarise the conversation you are given in a few sentences, so that the "
    "assistant can go on without it. Keep names, facts, numbers, decisions, tool "
    "results that matter and what is still open."
)
"""The summariser's system text when ``Compaction.instructions`` is None."""

MEDIA_CHARS = 4000
"""What an image or a file counts for in the estimate, in characters (about
1,000 tokens): its bytes are not text, and providers bill images by size."""


@dataclass(frozen=True, slots=True)
class Compaction:
    """When and how a conversation is compacted.

    - ``max_tokens``: compact before a model call whose conversation is
      estimated over this many tokens. Leave room under the model's context
      window for the system text, tools and the reply.
    - ``keep_last``: how many of the latest messages stay as they are (more
      when needed so that a tool call stays with its result).
    - ``model``: the summariser (a model string or a Model); None: the
      agent's own model.
    - ``instructions``: the summariser's system text, replacing
      :data:`DEFAULT_INSTRUCTIONS`.

    A summary may be at most a quarter of ``max_tokens`` long (64 to 4,096
    tokens), so that what follows a compaction is well under ``max_tokens``.

    >>> Compaction(max_tokens=150_000, keep_last=10)
    Compaction(max_tokens=150000, keep_last=10, model=None, instructions=None)
    """

    max_tokens: int
    keep_last: int = 6
    model: str | Model | None = None
    instructions: str | None = None

    def __post_init__(self) -> None:
        if type(self.max_tokens) is not int or self.max_tokens < 1:
            raise ValueError(f"Compaction.max_tokens must be an int >= 1, got {self.max_tokens!r}")
        if type(self.keep_last) is not int or self.keep_last < 0:
            raise ValueError(f"Compaction.keep_last must be an int >= 0, got {self.keep_last!r}")
        if not (self.model is None or isinstance(self.model, Model)) and (
            not isinstance(self.model, str) or not self.model
        ):
            raise ValueError(
                f"Compaction.model must be a model string, a Model or None, got {self.model!r}"
            )
        if self.instructions is not None and (
            not isinstance(self.instructions, str) or not self.instructions.strip()
        ):
            raise ValueError(
                "Compaction.instructions must be a non-empty string or None, "
                f"got {self.instructions!r}"
            )


@dataclass(frozen=True, slots=True)
class TokenReport:
    """What a provider reported for the request that produced ``reply``.

    ``input_tokens`` counts the whole input of that request, cached or not.
    A report is only good while the conversation is the one that request was
    built from, with more messages after: pass none after a compaction until
    the next reply.
    """

    reply: Message
    input_tokens: int

    @classmethod
    def of(cls, reply: Message, usage: Usage) -> TokenReport:
        total = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
        return cls(reply, total)


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What :func:`plan_compaction` decided for one model call.

    - ``message``: the new compaction message, to store; None when nothing
      was compacted.
    - ``index``: where ``message`` belongs in the messages the plan was given:
      right before ``messages[index]``, the first message kept.
    - ``send``: what the model sees now (before ``convert_to_llm``): the
      latest summary and what follows it.
    - ``tokens``: the estimate of ``send``.
    - ``failure``: why the conversation goes on uncompacted although it is
      over ``max_tokens`` (the summariser failed or returned nothing, or
      everything is in the kept tail); None otherwise.
    """

    message: Message | None
    index: int
    send: tuple[Message, ...]
    tokens: int
    failure: str | None = None


def conversation_view(messages: Sequence[Message]) -> tuple[Message, ...]:
    """The part of a conversation a model sees: the latest compaction message on."""
    return tuple(messages[view_start(messages) :])


def view_start(messages: Sequence[Message]) -> int:
    """The index of the latest compaction message (0 when there is none)."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].type == "compaction":
            return index
    return 0


def estimate_tokens(messages: Sequence[Message], report: TokenReport | None = None) -> int:
    """Tokens ``messages`` would take: the reported input of the latest reply
    found in them (the ``report``'s) plus characters / 4 of that reply and what
    follows; without one, characters / 4 of them all.

    Characters are those of :func:`~turnkit.message_text_body`; an image or a
    file counts as :data:`MEDIA_CHARS`.
    """
    start, base = 0, 0
    if report is not None:
        for index in range(len(messages) - 1, -1, -1):
            if messages[index] is report.reply:
                start, base = index, report.input_tokens
                break
    chars = sum(_chars(messages[i]) for i in range(start, len(messages)))
    return base + math.ceil(chars / 4)


def _chars(message: Message) -> int:
    media = sum(1 for b in message.content if type(b) in (ImageBlock, FileBlock))
    return len(message_text_body(message)) + media * MEDIA_CHARS


def cut_index(messages: Sequence[Message], keep_last: int) -> int:
    """The index of the first message kept when all but ``keep_last`` are summarised.

    The cut moves earlier (keeping more) rather than split what belongs
    together: a tool call from its result, or a reply from the assistant
    message of thinking alone right before it. 0: nothing can be summarised.
    """
    cut = max(0, len(messages) - keep_last)
    while 0 < cut < len(messages) and _together(messages[cut - 1], messages[cut]):
        cut -= 1
    return cut


def _together(before: Message, after: Message) -> bool:
    if before.role != "assistant":
        return False
    if after.role == "assistant":  # a reply in parts: its thinking, then the rest
        return bool(before.content) and all(type(b) is ThinkingBlock for b in before.content)
    calls = {b.id for b in before.content if type(b) is ToolUseBlock}
    return bool(calls) and any(
        type(b) is ToolResultBlock and b.tool_use_id in calls for b in after.content
    )


async def plan_compaction(
    messages: Sequence[Message],
    compaction: Compaction,
    model: Model,
    *,
    report: TokenReport | None = None,
    summariser: Model | None = None,
) -> CompactionPlan:
    """Decide, before a model call, whether to compact ``messages``; compact if so.

    ``messages`` is the conversation as stored (validated, compaction
    messages in their place); ``model`` the one the call goes to (its
    ``context_window`` decides what happens when summarising fails);
    ``report`` the provider's count for the latest reply, when known;
    ``summariser`` the resolved ``compaction.model`` (default: resolved here,
    else ``model``). Raises :class:`~turnkit.ContextTooLongError` when the
    summary fails and the conversation is over the model's window.
    """
    start = view_start(messages)
    view = tuple(messages[start:])
    tokens = estimate_tokens(view, report)
    if tokens <= compaction.max_tokens:
        return CompactionPlan(None, start, view, tokens)
    cut = cut_index(view, compaction.keep_last)
    try:
        if cut == 0 or (cut == 1 and view[0].type == "compaction"):
            raise _NothingToSummarise(
                f"every message is in the kept tail (keep_last={compaction.keep_last})"
            )
        if summariser is None:
            summariser = summariser_for(compaction, model)
        limit = min(4096, max(64, compaction.max_tokens // 4))
        text = await summarise(view[:cut], summariser, compaction.instructions, limit)
    except Exception as err:
        failure = str(err) if isinstance(err, _NothingToSummarise) else _why(err)
        window = model.context_window
        if window is None or tokens <= window:
            return CompactionPlan(None, start, view, tokens, failure)
        raise ContextTooLongError(
            f"the conversation is about {tokens} tokens, more than the context window of "
            f"{model.id} ({window}), and compacting it failed: {failure}",
            tokens=tokens,
            context_window=window,
            cause=failure,
        ) from err
    message = compaction_message(text, view[:cut], view[cut:], tokens)
    send = (message, *view[cut:])
    return CompactionPlan(message, start + cut, send, message.metadata["tokens_after"])


class _NothingToSummarise(Exception):
    pass


def _why(err: Exception) -> str:
    return f"{type(err).__name__}: {err}"


def summariser_for(compaction: Compaction, model: Model) -> Model:
    """The model that writes summaries: ``compaction.model``, else ``model``."""
    if compaction.model is None:
        return model
    from turnkit.providers.registry import resolve_model

    return resolve_model(compaction.model)


async def summarise(
    messages: Sequence[Message],
    model: Model,
    instructions: str | None = None,
    max_output_tokens: int | None = None,
) -> str:
    """The summary ``model`` writes of ``messages``; raises if it writes none.

    The request is one user message holding the messages as text (an
    earlier summary first, images and files as a mention), with
    ``instructions`` (default :data:`DEFAULT_INSTRUCTIONS`) as its system text,
    and ``max_output_tokens`` (None: the model's default) as its length limit.
    """
    request = ModelRequest(
        (Message.user(transcript(messages)),),
        instructions or DEFAULT_INSTRUCTIONS,
        settings=ModelSettings(max_output_tokens=max_output_tokens),
    )
    response = await model.request(request)
    text = response.text.strip()
    if not text:
        raise ValueError(f"the summariser {model.id} returned no text")
    return text


def transcript(messages: Sequence[Message]) -> str:
    """``messages`` as the text a summariser reads, one block per message.

    Thinking is left out (a model's private reasoning, not the conversation)
    and so are ``custom`` messages (no model saw them); an image becomes
    ``[image] <url or media type>``. One line starts each message
    (``User: ...``), and the request comes after the conversation: even the
    embedded 135M model then summarises instead of going on with the talk.
    """
    parts = []
    for message in messages:
        if message.type == "custom":
            continue
        if message.type in ("compaction", "branch_summary"):
            label = "Summary of the conversation before this point"
            body = "\n".join(b.text for b in message.content if type(b) is TextBlock)
        else:
            label, body = message.role.capitalize(), message_text_body(collapse_for_llm(message))
        parts.append(f"{label}: {body}")
    conversation = "\n".join(parts)
    return (
        f"<conversation>\n{conversation}\n</conversation>\n\n"
        "Summarise the conversation above in a few sentences."
    )


def compaction_message(
    summary: str, replaced: Sequence[Message], kept: Sequence[Message], tokens_before: int
) -> Message:
    """The ``compaction`` message standing for ``replaced``, with its metadata.

    ``replaced`` in the metadata counts the messages it stands for: an
    earlier summary among them counts for the messages it stood for.
    """
    count = sum(_stands_for(m) for m in replaced)
    draft = Message("user", (TextBlock(summary),), type="compaction")
    after = estimate_tokens((draft, *kept))
    metadata = {"replaced": count, "tokens_before": tokens_before, "tokens_after": after}
    return draft.clone(metadata=metadata)


def _stands_for(message: Message) -> int:
    if message.type == "compaction" and isinstance(message.metadata, Mapping):
        replaced = message.metadata.get("replaced")
        if type(replaced) is int and replaced >= 0:
            return replaced
    return 1


async def compact(
    messages: Sequence[Message | dict[str, object]],
    model: str | Model,
    keep_last: int = 6,
    instructions: str | None = None,
) -> list[Message]:
    """A new list: one compaction message summarising all but the last
    ``keep_last`` messages, followed by the messages kept.

    Works on any message list (dicts or Messages, validated). A list that
    already holds a compaction message is compacted from the latest one on
    (what came before it is in that summary). When every message is in the
    kept tail, nothing is summarised and the messages come back as they are.
    A summariser that fails raises its error; one that returns no text
    raises ValueError.

    >>> compacted = await compact(history, "anthropic:claude-haiku-4-5")  # doctest: +SKIP
    >>> compacted[0].type, compacted[0].metadata["replaced"]            # doctest: +SKIP
    ('compaction', 40)
    """
    checked = validate_messages(messages)
    settings = Compaction(1, keep_last=keep_last, instructions=instructions)
    from turnkit.providers.registry import resolve_model

    resolved = resolve_model(model)
    view = conversation_view(checked)
    cut = cut_index(view, settings.keep_last)
    if cut == 0 or (cut == 1 and view[0].type == "compaction"):
        return list(checked)
    text = await summarise(view[:cut], resolved, settings.instructions)
    message = compaction_message(text, view[:cut], view[cut:], estimate_tokens(view))
    return [message, *view[cut:]]
