"""Field checks shared by the block and message classes.

Each check raises :class:`InvalidMessageError` with a path relative to the
object being built; callers further out prefix their own position.
"""

from __future__ import annotations

import base64
import re
import string
import threading
from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit

from turnkit.errors import InvalidMessageError
from turnkit.messages._json import _CheckedFrozenDict, _freeze_object, _NotPlain, freeze_json

IMAGE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*")
_BASE64_ALPHABET = (string.ascii_letters + string.digits + "+/").encode()


def kind_of(value: object) -> str:
    """A short name for the type of ``value``, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def need_str(value: object, field: str, *, non_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidMessageError(field, f"expected a string, got {kind_of(value)}")
    if non_empty and not value:
        raise InvalidMessageError(field, "must not be empty")
    return value


def need_bool(value: object, field: str) -> bool:
    if type(value) is not bool:
        raise InvalidMessageError(field, f"expected a boolean, got {kind_of(value)}")
    return value


def need_choice(value: object, field: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        allowed = ", ".join(repr(choice) for choice in choices)
        raise InvalidMessageError(field, f"expected one of {allowed}, got {value!r}")
    return value


def check_media_type(value: object, field: str, *, image: bool) -> str:
    media_type = need_str(value, field)
    if not _MEDIA_TYPE.fullmatch(media_type):
        raise InvalidMessageError(field, f"{media_type!r} is not a type/subtype media type")
    if image and media_type not in IMAGE_MEDIA_TYPES:
        allowed = ", ".join(sorted(IMAGE_MEDIA_TYPES))
        raise InvalidMessageError(field, f"unsupported image type {media_type!r} (use {allowed})")
    return media_type


def check_http_url(value: object, field: str) -> str:
    url = need_str(value, field)
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None
    if (
        parts is None
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or any(char.isspace() or ord(char) < 32 for char in url)
    ):
        shown = url if len(url) <= 80 else url[:77] + "..."
        raise InvalidMessageError(field, f"{shown!r} is not an absolute http(s) URL")
    return url


class _Base64Memo:
    """Remembers base64 strings already found canonical.

    Reading the data is the only O(bytes) step of validation. Histories are
    re-validated every turn with the same image strings, and a str caches its
    hash, so a hit costs O(1) for the same object. Bounded in bytes; only
    strings of ``min_len`` or more are kept; safe across threads.
    """

    def __init__(self, max_bytes: int = 64 * 1024 * 1024, min_len: int = 4096) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._bytes = 0
        self._max_bytes = max_bytes
        self._min_len = min_len
        self._lock = threading.Lock()

    def __contains__(self, data: str) -> bool:
        if len(data) < self._min_len:
            return False
        with self._lock:
            if data not in self._seen:
                return False
            self._seen.move_to_end(data)
            return True

    def add(self, data: str) -> None:
        if len(data) < self._min_len or len(data) > self._max_bytes:
            return
        with self._lock:
            if data in self._seen:
                return
            self._seen[data] = None
            self._bytes += len(data)
            while self._bytes > self._max_bytes:
                old, _ = self._seen.popitem(last=False)
                self._bytes -= len(old)


_canonical = _Base64Memo()


def check_base64(value: object, field: str) -> str:
    """Canonical base64: standard alphabet, padded, zero trailing bits."""
    data = need_str(value, field)
    if data in _canonical:
        return data
    if not data:
        raise InvalidMessageError(field, "must not be empty")
    if not data.isascii() or len(data) % 4:
        raise InvalidMessageError(field, "not canonical base64")
    body = data.rstrip("=")
    if len(data) - len(body) > 2 or body.encode().translate(None, _BASE64_ALPHABET):
        raise InvalidMessageError(field, "not canonical base64")
    if not _tail_is_canonical(data[-4:]):
        raise InvalidMessageError(field, "not canonical base64 (non-zero padding bits)")
    _canonical.add(data)
    return data


def _tail_is_canonical(tail: str) -> bool:
    return base64.b64encode(base64.b64decode(tail)).decode() == tail


def check_json_object(value: object, field: str) -> Any:
    """A deeply frozen copy of a JSON object (see :func:`freeze_json`)."""
    if type(value) is _CheckedFrozenDict:
        return value
    if not isinstance(value, dict):
        raise InvalidMessageError(field, f"expected a JSON object, got {kind_of(value)}")
    try:
        return _freeze_object(value, 1)  # the common case, without a second call
    except _NotPlain:
        return freeze_json(value, field)  # walks again, to name the place
