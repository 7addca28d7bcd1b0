"""Spans for orchestrated runs: ``on_trace`` records and OpenTelemetry.

Each span is reported to ``on_trace`` as a :class:`TraceEvent` when it ends,
and, when ``opentelemetry`` is importable, also recorded as an OpenTelemetry
span through the global tracer provider (``opentelemetry-api`` alone records
nothing; an SDK provider, or a vendor's, exports them). Attributes follow the
gen_ai semantic conventions. By default they carry sizes and counts only,
never content: no text, thinking, image data or tool input; with
``capture_content=True`` the messages, as JSON of their wire dicts, are added.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractContextManager, asynccontextmanager, nullcontext
from contextvars import ContextVar
from typing import Any, Literal

from turnkit.messages import (
    FileBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from turnkit.orchestrator.events import TraceCallback, TraceEvent, emit
from turnkit.providers.base import Usage

__all__ = ["Span", "Tracer", "content_attributes", "message_stats", "usage_attributes"]

SpanKind = Literal["internal", "client"]

_current: ContextVar[Span | None] = ContextVar("turnkit_span", default=None)
_UNSET: Any = object()
_otel_trace: Any = _UNSET  # the opentelemetry.trace module, None when not installed


class Span:
    """A span being recorded; set attributes on it until it ends."""

    __slots__ = (
        "_otel",
        "attributes",
        "error",
        "name",
        "parent_id",
        "span_id",
        "start",
        "trace_id",
    )

    def __init__(self, name: str, parent: Span | None, otel: Any) -> None:
        self.name = name
        self.parent_id = parent.span_id if parent else None
        self.trace_id = parent.trace_id if parent else os.urandom(16).hex()
        self.span_id = os.urandom(8).hex()
        self.attributes: dict[str, Any] = {}
        self.error: str | None = None
        self.start = time.time()
        self._otel = otel
        context = otel.get_span_context() if otel is not None else None
        if context is not None and getattr(context, "is_valid", False):
            self.trace_id = format(context.trace_id, "032x")
            self.span_id = format(context.span_id, "016x")

    def set(self, attributes: Mapping[str, Any]) -> None:
        """Add ``attributes`` (None values are left out)."""
        for key, value in attributes.items():
            if value is None:
                continue
            self.attributes[key] = value
            if self._otel is not None:
                self._otel.set_attribute(key, _otel_value(value))

    def fail(self, error: BaseException | str) -> None:
        """Mark the span failed, with the error's type and text."""
        if isinstance(error, BaseException):
            self.set({"error.type": type(error).__name__})
            error = f"{type(error).__name__}: {error}"
        self.error = error
        if self._otel is not None:
            from opentelemetry.trace import Status, StatusCode

            self._otel.set_status(Status(StatusCode.ERROR, error))

    def finish(self) -> TraceEvent:
        status: Literal["ok", "error"] = "ok" if self.error is None else "error"
        return TraceEvent(
            self.name,
            self.span_id,
            self.parent_id,
            self.trace_id,
            self.start,
            time.time(),
            dict(self.attributes),
            status,
            self.error,
        )


class Tracer:
    """Opens spans that nest by async context, reported to ``on_trace`` and OTel."""

    def __init__(self, on_trace: TraceCallback | None, capture_content: bool) -> None:
        self.on_trace = on_trace
        self.capture_content = capture_content

    @asynccontextmanager
    async def span(
        self, name: str, attributes: Mapping[str, Any], kind: SpanKind = "internal"
    ) -> AsyncIterator[Span]:
        """A span around the block; an exception marks it failed and propagates."""
        span: Span | None = None
        try:
            with self._otel_span(name, kind) as otel:
                span = Span(name, _current.get(), otel)
                span.set(attributes)
                token = _current.set(span)
                try:
                    yield span
                except BaseException as err:
                    span.fail(err)
                    raise
                finally:
                    _current.reset(token)
        finally:
            if span is not None:
                await emit(self.on_trace, span.finish())

    def _otel_span(self, name: str, kind: SpanKind) -> AbstractContextManager[Any]:
        trace = _opentelemetry_trace()
        if trace is None:
            return nullcontext(None)
        span_kind = trace.SpanKind.CLIENT if kind == "client" else trace.SpanKind.INTERNAL
        tracer = trace.get_tracer("turnkit")
        # Status is set by Span.fail; OTel would otherwise record the exception
        # with its message and traceback, which may quote content.
        return tracer.start_as_current_span(
            name, kind=span_kind, record_exception=False, set_status_on_exception=False
        )


def _opentelemetry_trace() -> Any:
    """``opentelemetry.trace``, imported on first use; None when not installed."""
    global _otel_trace
    if _otel_trace is _UNSET:
        try:
            from opentelemetry import trace
        except ImportError:
            trace = None
        _otel_trace = trace
    return _otel_trace


def _otel_value(value: Any) -> Any:
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [item if isinstance(item, (str, bool, int, float)) else str(item) for item in value]
    return json.dumps(value, ensure_ascii=False, default=str)


_STAT_NAMES = (
    "messages",
    "text_chars",
    "thinking_chars",
    "images",
    "files",
    "tool_calls",
    "tool_results",
)


def usage_attributes(usage: Usage) -> dict[str, int]:
    """The gen_ai usage attributes: input counts cached tokens too, then each cached part."""
    return {
        "gen_ai.usage.input_tokens": usage.total_tokens - usage.output_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
        "gen_ai.usage.cache_read.input_tokens": usage.cache_read_tokens,
        "gen_ai.usage.cache_creation.input_tokens": usage.cache_write_tokens,
    }


def message_stats(messages: Sequence[Message], prefix: str) -> dict[str, int]:
    """Counts and sizes of ``messages``: no content, safe for any telemetry."""
    counts = dict.fromkeys(_STAT_NAMES, 0)
    counts["messages"] = len(messages)
    for message in messages:
        for block in message.content:
            if type(block) is TextBlock:
                counts["text_chars"] += len(block.text)
            elif type(block) is ThinkingBlock:
                counts["thinking_chars"] += len(block.thinking)
            elif type(block) is ImageBlock:
                counts["images"] += 1
            elif type(block) is FileBlock:
                counts["files"] += 1
            elif type(block) is ToolUseBlock:
                counts["tool_calls"] += 1
            elif type(block) is ToolResultBlock:
                counts["tool_results"] += 1
    return {f"{prefix}.{key}": value for key, value in counts.items()}


def content_attributes(key: str, messages: Sequence[Message]) -> dict[str, str]:
    """``{key: JSON of the messages' wire dicts}``, for ``capture_content=True``."""
    return {key: json.dumps([m.to_dict() for m in messages], ensure_ascii=False)}
