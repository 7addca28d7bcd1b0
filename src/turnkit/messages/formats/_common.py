"""What every history format shares: reading provider JSON with paths, and
the export rules for messages and thinking.

Import side: a small set of readers that raise :class:`InvalidMessageError`
naming the place in the caller's data (``messages[2].tool_calls[0].id``),
and :class:`Collector`, which builds the turnkit messages and refuses a
tool-call id seen twice. Export side: :func:`exportable` (validated, standard
messages only) and :func:`thinking_fallback` (what to do with thinking the
format cannot carry natively).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal, TypeAlias

from turnkit.errors import InvalidMessageError
from turnkit.messages._checks import kind_of
from turnkit.messages.blocks import Base64Source, Block, TextBlock, ThinkingBlock
from turnkit.messages.message import Message, Origin
from turnkit.messages.validate import validate_messages

__all__ = [
    "Collector",
    "ThinkingExport",
    "at",
    "check_mode",
    "data_url",
    "exportable",
    "foreign_reason",
    "json_object",
    "native_origin",
    "need_keys",
    "need_list",
    "need_object",
    "need_text",
    "origin_for",
    "parse_data_url",
    "thinking_fallback",
]

ThinkingExport: TypeAlias = Literal["keep", "text", "drop"]
"""What ``to_*`` does with thinking the format cannot carry natively:
``"keep"`` raises (nothing is lost without being asked), ``"text"`` sends it
as ``<thinking>`` text, ``"drop"`` leaves it out."""


# -- reading -------------------------------------------------------------------


@contextmanager
def at(path: str) -> Iterator[None]:
    """Put ``path`` in front of the path of a turnkit error raised inside."""
    try:
        yield
    except InvalidMessageError as err:
        raise err.within(path) from None


def need_object(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidMessageError(path, f"expected an object, got {kind_of(value)}")
    return value


def need_list(value: object, path: str) -> Sequence[Any]:
    if not isinstance(value, (list, tuple)):
        raise InvalidMessageError(path, f"expected a list, got {kind_of(value)}")
    return value


def need_text(value: object, path: str) -> str:
    if not isinstance(value, str):
        raise InvalidMessageError(path, f"expected a string, got {kind_of(value)}")
    return value


def need_keys(
    obj: Mapping[str, Any],
    path: str,
    allowed: frozenset[str] | set[str],
    *,
    required: tuple[str, ...] = (),
    fmt: str,
) -> None:
    """Refuse fields turnkit has no place for (nothing is dropped silently)."""
    for key in required:
        if key not in obj:
            raise InvalidMessageError(f"{path}.{key}", "required field is missing")
    for key in obj:
        if key not in allowed:
            problem = f"turnkit messages have no place for this {fmt} field"
            raise InvalidMessageError(f"{path}.{key}", problem)


def json_object(text: object, path: str) -> dict[str, Any]:
    """Tool-call arguments: a JSON object given as a string (or already parsed)."""
    if isinstance(text, Mapping):
        return dict(text)
    text = need_text(text, path)
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        raise InvalidMessageError(path, "not valid JSON") from None
    if not isinstance(value, dict):
        raise InvalidMessageError(path, f"expected a JSON object, got {kind_of(value)}")
    return value


def parse_data_url(url: str, path: str) -> Base64Source:
    """A ``data:<type>;base64,<data>`` URL as a base64 source."""
    header, comma, payload = url[5:].partition(",") if url.startswith("data:") else ("", "", "")
    params = header.split(";")
    if not comma or "base64" not in params[1:] or not params[0]:
        raise InvalidMessageError(path, "expected a data:<media type>;base64,<data> URL")
    try:
        raw = base64.b64decode(payload + "=" * (-len(payload) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidMessageError(path, "the data: URL holds invalid base64") from None
    with at(path):
        return Base64Source(params[0].lower(), base64.b64encode(raw).decode("ascii"))


def data_url(source: Base64Source) -> str:
    return f"data:{source.media_type};base64,{source.data}"


def origin_for(provider: str, model: str | None) -> Origin | None:
    """The origin imported assistant messages get: known only when ``model`` is given."""
    if model is None:
        return None
    if not isinstance(model, str) or not model:
        raise ValueError(f"model must be a non-empty string or None, got {model!r}")
    return Origin(provider, model)


class Collector:
    """Builds the imported messages; a tool_use id seen twice is refused where it is."""

    def __init__(self, origin: Origin | None) -> None:
        self.origin = origin
        self.messages: list[Message] = []
        self._call_ids: set[str] = set()

    def add(self, role: str, blocks: Sequence[Block], path: str) -> Message:
        with at(path):
            message = Message(
                role, tuple(blocks), origin=self.origin if role == "assistant" else None
            )  # type: ignore[arg-type]
        self.messages.append(message)
        return message

    def call_id(self, call_id: object, path: str) -> str:
        call_id = need_text(call_id, path)
        if call_id in self._call_ids:
            raise InvalidMessageError(path, f"duplicate tool call id {call_id!r}")
        self._call_ids.add(call_id)
        return call_id

    def result(self) -> list[Message]:
        return self.messages


# -- writing -------------------------------------------------------------------


def exportable(messages: object) -> tuple[Message, ...]:
    """Validated standard messages; other message types have no place in a transcript."""
    history = validate_messages(messages)
    for index, message in enumerate(history):
        if message.type != "standard":
            raise InvalidMessageError(
                f"messages[{index}].type",
                f"a {message.type} message has no place in a provider transcript "
                "(convert the history first, e.g. with default_convert_to_llm)",
            )
    return history


def thinking_fallback(
    block: ThinkingBlock, mode: ThinkingExport, path: str, reason: str
) -> TextBlock | None:
    """Thinking the format cannot carry natively (``reason`` says why): refused
    (``"keep"``), sent as ``<thinking>`` text (``"text"``), or left out (``"drop"``)."""
    if mode == "keep":
        raise InvalidMessageError(
            path,
            f"{reason}; pass thinking='text' to send it as text or thinking='drop' to leave it out",
        )
    if mode == "text" and not block.redacted and block.thinking.strip():
        return TextBlock(f"<thinking>\n{block.thinking}\n</thinking>")
    return None


def foreign_reason(message: Message, block: ThinkingBlock, provider: str, target: str) -> str:
    """Why ``block`` cannot go natively to ``provider``, in words."""
    origin = message.origin
    if origin is not None and origin.provider != provider:
        return f"{target} cannot carry thinking written by {origin.provider}:{origin.model}"
    if not block.signature:
        return f"{target} cannot carry unsigned thinking"
    return f"{target} cannot carry this thinking here"


def check_mode(mode: object) -> None:
    if mode not in ("keep", "text", "drop"):
        raise ValueError(f"thinking must be 'keep', 'text' or 'drop', not {mode!r}")


def native_origin(message: Message, provider: str) -> bool:
    """Thinking of ``message`` may go natively to ``provider``: its own, or of unknown origin."""
    return message.origin is None or message.origin.provider == provider
