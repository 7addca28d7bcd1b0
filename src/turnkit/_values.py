"""Small value helpers of what turnkit stores: ids, times, JSON text, UTF-8 cuts.

Shared by the sessions and the channels (which store rows of their own), so
it belongs to neither package. Light on purpose (standard library only): the
render hooks and ``turnkit.subagent`` import this without loading SQLAlchemy
or DBOS.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "cut_utf8",
    "describe_error",
    "dumps",
    "new_id",
    "now",
    "storable",
    "uuid4_str",
    "when",
]


def dumps(value: Any) -> str:
    """JSON text as turnkit stores it: UTF-8, compact, no NaN."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def now() -> float:
    """The wall clock, in UNIX seconds: the one clock sessions read."""
    return time.time()


def when(seconds: float | None) -> datetime | None:
    """A stored time (UNIX seconds) as an aware UTC datetime."""
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def uuid4_str() -> str:
    """``str(uuid.uuid4())``, in about 40% of its time (no ``UUID`` object is built:
    every run of an agent makes one)."""
    raw = bytearray(os.urandom(16))
    raw[6] = raw[6] & 0x0F | 0x40  # version 4
    raw[8] = raw[8] & 0x3F | 0x80  # the RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def cut_utf8(text: str, limit: int) -> tuple[str, bool]:
    """``text`` cut at a character boundary to at most ``limit`` bytes of UTF-8."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text, False
    return raw[:limit].decode("utf-8", errors="ignore"), True


def describe_error(err: BaseException) -> str:
    """``Type: text`` of an exception, even one whose ``str()`` raises."""
    try:
        text = str(err)
    except Exception:
        text = "(unprintable)"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


def storable(text: str | None) -> str | None:
    """``text`` as a database's text column takes it: U+0000 (which Postgres refuses)
    shown as U+FFFD, and what is not valid Unicode (lone surrogates) replaced.

    For text kept beside its exact form (a turn's output column; the reply
    itself is stored as JSON, where U+0000 is escaped) and for error texts.
    """
    if text is None:
        return None
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text
