"""Every provider edge case, decided once for all providers.

Each provider module (``anthropic``, ``openai_chat``, ``openai_responses``,
``gemini``, ``local``) converts requests and parses replies through these
functions, so the providers cannot disagree:

- :func:`check_content`: a block a provider cannot take where it sits (an
  image or file in an assistant message, a file type or a file URL the API
  does not read) raises :class:`UnsupportedContentError` naming its path,
  before any request is sent. Nothing is dropped.
- :func:`drop_empty_text`: text that is empty or only whitespace is not
  sent, by any provider (Anthropic refuses it everywhere, Gemini refuses
  empty parts); a message with nothing in it (``content: []``, or left
  with nothing) is not sent either (Anthropic refuses it).
- :func:`check_history_start`: a request with no user or assistant message
  left to send raises :class:`InvalidMessageError` ("nothing to send")
  before any request (OpenAI refuses ``[]``, the Gemini SDK raises its own
  ``ValueError``); one whose first message is the
  assistant's gets :data:`HISTORY_START` as a user message before it
  (Anthropic and Gemini refuse a history that starts with the model).
- :func:`tool_call`: tool-call arguments from a model that are not a JSON
  object (bad JSON, an array, NaN/Infinity, too deep) become
  ``{RAW_ARGUMENTS: "<the raw text>"}``; tool execution answers the model
  with an error naming the problem and its raw text.
- :func:`data_url`: base64 sources in a ``data:`` URL, for the APIs that
  take URLs only.
- :func:`provider_error`: any SDK or transport error as a
  :class:`ProviderError` (status, the provider's message, ``retryable``,
  ``retry_after``); a stream broken mid-way is retryable for every provider.
  :func:`sdk_error`: anything else an SDK raises (a request it will not
  send, a missing key) as a ProviderError too, not retryable.
- :func:`usage`: token counts in one shape: ``input_tokens`` is the input
  not read from or written to the cache, ``cache_read_tokens`` and
  ``cache_write_tokens`` the cached parts, each counted once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from turnkit._http import retry_after_seconds
from turnkit.errors import InvalidMessageError, ProviderError, UnsupportedContentError
from turnkit.messages import (
    Base64Source,
    FileBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from turnkit.providers.base import Usage

__all__ = [
    "ACCEPTS",
    "HISTORY_START",
    "RAW_ARGUMENTS",
    "Accepts",
    "check_content",
    "check_history_start",
    "data_url",
    "drop_empty_text",
    "failure_reported",
    "file_media_type",
    "is_retryable_status",
    "provider_error",
    "raw_arguments_problem",
    "refuse",
    "sdk_error",
    "tool_call",
    "transport_errors",
    "usage",
]

HISTORY_START = "(The conversation starts with the assistant's message below.)"
"""The user message put before a history whose first message is the assistant's."""

RAW_ARGUMENTS = "_raw_arguments"
"""The input key that holds tool-call arguments which were not a JSON object."""


# -- what each API takes where --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Accepts:
    """What one wire API takes, and where.

    ``file_types`` are media types (``"text/*"`` matches a family, ``"*"``
    any) taken inline as base64; ``file_url_types`` those taken by URL.
    ``assistant_media``: images and files in assistant messages;
    ``image_urls``: images by URL (else they are fetched, when the image
    policy allows it, or refused).
    """

    api: str
    images: bool = True
    assistant_media: bool = False
    image_urls: bool = True
    file_types: tuple[str, ...] = ()
    file_url_types: tuple[str, ...] = ()


ACCEPTS: Mapping[str, Accepts] = {
    "anthropic": Accepts(
        "Anthropic", file_types=("application/pdf", "text/*"), file_url_types=("application/pdf",)
    ),
    "openai": Accepts("Chat Completions", file_types=("application/pdf",)),
    "openai-responses": Accepts(
        "the Responses API",
        file_types=("application/pdf",),
        file_url_types=("application/pdf",),
    ),
    "gemini": Accepts(
        "Gemini",
        assistant_media=True,
        image_urls=False,
        file_types=("*",),
        file_url_types=("*",),
    ),
    "local": Accepts("the local model", images=False),
}
"""Per provider: ``ollama`` and other compatible servers use ``"openai"``."""


def check_content(
    messages: Sequence[Message], provider: str, *, fetch_image_urls: bool = False
) -> None:
    """Raise UnsupportedContentError for the first block ``provider`` cannot take.

    The error names the block by its path in the request
    (``messages[2].content[1]``) and says what the API takes instead.
    ``fetch_image_urls``: the image policy lets URL images be fetched and
    inlined for APIs that take no image URLs.
    """
    accepts = ACCEPTS.get(provider, ACCEPTS["openai"])
    if not accepts.image_urls and fetch_image_urls:
        accepts = replace(accepts, image_urls=True)
    for m_index, message in enumerate(messages):
        for b_index, block in enumerate(message.content):
            where = f"messages[{m_index}].content[{b_index}]"
            if isinstance(block, ToolResultBlock) and not isinstance(block.content, str):
                for p_index, part in enumerate(block.content):
                    _check_block(
                        part, message.role, accepts, provider, f"{where}.content[{p_index}]"
                    )
            else:
                _check_block(block, message.role, accepts, provider, where)


def _check_block(block: object, role: str, accepts: Accepts, provider: str, where: str) -> None:
    if not isinstance(block, (ImageBlock, FileBlock)):
        return
    kind = "image" if isinstance(block, ImageBlock) else f"file {block.filename!r}"
    problem = None
    if not accepts.images:
        problem = (
            f"reads text only: remove the {kind}, or use a model that takes images and "
            "files (anthropic:, openai:, gemini:)"
        )
    elif role == "assistant" and not accepts.assistant_media:
        problem = f"takes images and files only in user messages, not this {kind} of the assistant"
    elif isinstance(block, FileBlock):
        problem = _file_problem(block, accepts)
    elif not accepts.image_urls and not isinstance(block.source, Base64Source):
        problem = (
            f"cannot take image URLs ({block.source.url}): send the image as base64, "
            "or allow fetching with ImagePolicy(fetch_urls=True)"
        )
    if problem is not None:
        raise UnsupportedContentError(f"{where}: {accepts.api} {problem}", provider=provider)


def _file_problem(block: FileBlock, accepts: Accepts) -> str | None:
    source = block.source
    inline = isinstance(source, Base64Source)
    media_type = source.media_type or _guess_media_type(block.filename)
    allowed = accepts.file_types if inline else accepts.file_url_types
    if media_type is not None and any(_matches(media_type, kind) for kind in allowed):
        return None
    if not inline and accepts.file_url_types and media_type is None:
        return f"needs the media type of the file at {source.url!r} ({block.filename}): set it"
    if not inline and not accepts.file_url_types:
        return f"takes files inline (base64), not by URL ({source.url})"
    taken = " and ".join(allowed) if allowed else "no"
    how = "inline" if inline else "by URL"
    return f"takes {taken} files {how}, not {media_type} ({block.filename})"


def _guess_media_type(filename: str) -> str | None:
    import mimetypes  # here, not at the top: keeps `import turnkit` fast

    return mimetypes.guess_type(filename, strict=False)[0]


def _matches(media_type: str, kind: str) -> bool:
    if kind == "*" or kind == media_type:
        return True
    return kind.endswith("/*") and media_type.startswith(kind[:-1])


def refuse(block: object, where: str, provider: str) -> UnsupportedContentError:
    """The error for a block a converter meets where :func:`check_content` let none be."""
    kind = getattr(block, "type", type(block).__name__)
    api = ACCEPTS.get(provider, ACCEPTS["openai"]).api
    return UnsupportedContentError(
        f"{where}: {api} cannot take a {kind} block here", provider=provider
    )


def file_media_type(block: FileBlock) -> str:
    """The media type of a file that passed :func:`check_content`."""
    return block.source.media_type or _guess_media_type(block.filename) or "application/pdf"


# -- empty text and the shape of a history ----------------------------------------


def drop_empty_text(messages: Sequence[Message]) -> tuple[Message, ...]:
    """``messages`` without empty or whitespace-only text, and without messages
    that hold nothing (given with no content, or emptied here).

    A tool result whose parts were all empty text keeps an empty string.
    """
    out = []
    for message in messages:
        if message.content and not any(_has_empty_text(b) for b in message.content):
            out.append(message)
            continue
        content = tuple(_without_empty_text(b) for b in message.content if not _is_blank(b))
        if content:
            out.append(message.clone(content=content))
    return tuple(out)


def _is_blank(block: object) -> bool:
    return type(block) is TextBlock and not block.text.strip()


def _has_empty_text(block: object) -> bool:
    if type(block) is ToolResultBlock and not isinstance(block.content, str):
        return any(map(_is_blank, block.content))
    return _is_blank(block)


def _without_empty_text(block: Any) -> Any:
    if type(block) is not ToolResultBlock or isinstance(block.content, str):
        return block
    if not any(map(_is_blank, block.content)):
        return block
    parts = tuple(p for p in block.content if not _is_blank(p))
    return ToolResultBlock(block.tool_use_id, parts or "", block.is_error)


def check_history_start(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Refuse an empty history; give an assistant-first one a user message first.

    ``messages`` hold no system messages (they were hoisted).
    """
    if not messages:
        raise InvalidMessageError(
            "messages",
            "nothing to send: the history has no user or assistant message with content "
            "(messages with no blocks, and empty or whitespace-only text, are not sent)",
        )
    if messages[0].role == "assistant":
        return (Message.user(HISTORY_START), *messages)
    return tuple(messages)


# -- tool calls written by a model ---------------------------------------------------


def tool_call(call_id: str, name: str, arguments: str | Mapping[str, Any] | None) -> ToolUseBlock:
    """The ToolUseBlock for a call a model wrote, whatever its arguments were.

    ``arguments`` is the raw JSON text (OpenAI) or the object an SDK parsed
    (Anthropic, Gemini). Empty text is ``{}``; a JSON object is the input;
    anything else keeps its raw text as ``{RAW_ARGUMENTS: text}``.
    """
    if arguments is None:
        return ToolUseBlock(call_id, name, {})
    if isinstance(arguments, str):
        if not arguments.strip():
            return ToolUseBlock(call_id, name, {})
        raw = arguments
        try:
            value = json.loads(arguments, parse_constant=_no_constant)
        except (ValueError, RecursionError):
            return ToolUseBlock(call_id, name, {RAW_ARGUMENTS: raw})
    else:
        value = arguments
        raw = _dumped(arguments)
    if isinstance(value, Mapping):
        try:
            return ToolUseBlock(call_id, name, dict(value))
        except InvalidMessageError:  # NaN, Infinity, nested too deep
            pass
    return ToolUseBlock(call_id, name, {RAW_ARGUMENTS: raw})


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _dumped(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=repr)
    except (ValueError, RecursionError):
        return repr(value)


def raw_arguments_problem(arguments: Mapping[str, Any]) -> str | None:
    """What to tell the model when its arguments were kept raw, else None."""
    if set(arguments) != {RAW_ARGUMENTS} or not isinstance(arguments[RAW_ARGUMENTS], str):
        return None
    raw = arguments[RAW_ARGUMENTS]
    shown = raw if len(raw) <= 500 else raw[:500] + "…"
    return (
        "the arguments are not a JSON object (finite numbers only); "
        f"you sent: {shown}. Call the tool again with a JSON object."
    )


# -- data URLs -----------------------------------------------------------------------


def data_url(source: Base64Source) -> str:
    """``data:<media type>;base64,<data>`` for APIs that take sources as URLs."""
    return f"data:{source.media_type};base64,{source.data}"


# -- errors -----------------------------------------------------------------------------


def is_retryable_status(status: int | None) -> bool:
    """Whether an HTTP status is worth retrying: timeouts, conflicts, rate limits, 5xx."""
    return status is None or status in (408, 409, 429) or status >= 500


_RETRYABLE_FAILURES = frozenset(
    {"server_error", "api_error", "overloaded_error", "rate_limit_exceeded", "rate_limit_error"}
)
"""Error types (Anthropic) and codes (OpenAI) sent inside a stream or a response
that say the server failed, is overloaded or is rate limited: worth retrying."""


def transport_errors() -> tuple[type[BaseException], ...]:
    """What a connection broken mid-stream raises: the SDKs do not wrap it.

    The SDKs are built on ``httpx2`` (older releases: ``httpx``); the Gemini
    SDK may use ``aiohttp``. Only modules already loaded are looked at.
    """
    import sys

    found: list[type[BaseException]] = []
    for module, name in (("httpx2", "TransportError"), ("httpx", "TransportError")):
        loaded = sys.modules.get(module)
        if loaded is not None and isinstance(getattr(loaded, name, None), type):
            found.append(getattr(loaded, name))
    aiohttp = sys.modules.get("aiohttp")
    if aiohttp is not None:
        found.append(aiohttp.ClientError)
    return tuple(found)


_SDK_CONNECTION_ERRORS = frozenset({"APIConnectionError", "APITimeoutError"})


def provider_error(err: BaseException, provider: str, *, sdk_retries: int = 0) -> ProviderError:
    """The ProviderError for any SDK or transport error, the same way for every provider.

    An HTTP error keeps its status, the provider's own message (from the
    error body), ``retryable`` by status and ``retry_after`` from the
    response headers. An error the provider reported inside a stream (HTTP
    200 already sent) is retryable unless it names a bad request. Connection
    failures, timeouts and streams broken mid-way are retryable.

    ``sdk_retries`` is the SDK's ``max_retries``: HTTP errors and failures
    to connect were already retried that often (``retried``); a stream
    broken mid-way or an error sent inside one never is.
    """
    if isinstance(err, ProviderError):
        return err
    status = _status_of(err)
    message = _message_of(err)
    if status is None or status < 400:
        kind = _error_type(getattr(err, "body", None))
        if kind is not None:
            return failure_reported(message, kind, provider)
        connecting = type(err).__name__ in _SDK_CONNECTION_ERRORS
        return ProviderError(
            message, provider=provider, retryable=True, retried=connecting and sdk_retries > 0
        )
    headers = getattr(getattr(err, "response", None), "headers", None)
    retryable = is_retryable_status(status)
    return ProviderError(
        message,
        provider=provider,
        status=status,
        retryable=retryable,
        retry_after=retry_after_seconds(headers),
        retried=retryable and sdk_retries > 0,
    )


def sdk_error(err: Exception, provider: str) -> ProviderError:
    """A ProviderError for what an SDK raised that is not one of its API or
    transport errors: it refused the call before sending anything (e.g. the
    Gemini SDK's ``ValueError``, a client with no API key). Trying again
    cannot help."""
    try:
        text = str(err)
    except Exception:
        text = ""
    kind = type(err).__name__
    return ProviderError(
        f"the SDK raised {kind}: {text}" if text else f"the SDK raised {kind}", provider=provider
    )


def failure_reported(message: str | None, kind: str | None, provider: str) -> ProviderError:
    """An error a provider sent inside a stream or a response, after HTTP 200.

    Retryable when its type says the server failed, is overloaded or is rate
    limited; the SDK never retried it.
    """
    text = message or f"the response failed ({kind or 'no reason given'})"
    return ProviderError(text, provider=provider, retryable=kind in _RETRYABLE_FAILURES)


def _status_of(err: BaseException) -> int | None:
    for name in ("status_code", "code"):
        value = getattr(err, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _message_of(err: BaseException) -> str:
    for body in (getattr(err, "body", None), getattr(err, "details", None)):
        if isinstance(body, Mapping):
            inner = body.get("error")
            for holder in (inner, body):
                if isinstance(holder, Mapping) and isinstance(holder.get("message"), str):
                    return holder["message"]
    message = getattr(err, "message", None)
    if isinstance(message, str) and message:
        return message
    text = str(err)
    return text or f"{type(err).__name__} (the connection failed or broke)"


def _error_type(body: object) -> str | None:
    if isinstance(body, Mapping):
        inner = body.get("error")
        holder = inner if isinstance(inner, Mapping) else body
        kind = holder.get("type")
        return kind if isinstance(kind, str) else None
    return None


# -- usage ---------------------------------------------------------------------------------


def usage(
    *,
    input_tokens: int | None,
    output_tokens: int | None,
    cache_read: int | None = 0,
    cache_write: int | None = 0,
    input_includes_cache: bool,
) -> Usage:
    """Usage in turnkit's one shape, from what a provider reported.

    ``input_includes_cache``: the provider's input count already holds the
    cached tokens (OpenAI, Gemini), rather than reporting them beside it
    (Anthropic). Missing counts are 0; nothing is counted twice.
    """
    read, write = cache_read or 0, cache_write or 0
    given = input_tokens or 0
    fresh = max(given - read - write, 0) if input_includes_cache else given
    return Usage(fresh, output_tokens or 0, read, write)
