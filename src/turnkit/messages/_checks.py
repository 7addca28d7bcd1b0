"""Field checks shared by the block and message classes.

Each check raises :class:`InvalidMessageError` with a path relative to the
object being built; callers further out prefix their own position.
Caller objects are classified by ``type()`` (``issubclass(type(x), str)``),
never ``isinstance``, which would ask the object's own ``__class__``.
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
from turnkit.messages._json import FrozenDict, freeze_object

IMAGE_MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*")
_BASE64_ALPHABET = (string.ascii_letters + string.digits + "+/").encode()
_URL_BAD_CHAR = re.compile(r"[\s\x00-\x1f\x7f-\x9f\\]")
_LABEL = re.compile(r"(?!-)[A-Za-z0-9_-]{1,63}(?<!-)")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def kind_of(value: object) -> str:
    """A short name for the type of ``value``, for error messages."""
    if value is None:
        return "null"
    if issubclass(type(value), bool):
        return "a boolean"
    if issubclass(type(value), str):
        return "a string"
    if issubclass(type(value), (int, float)):
        return "a number"
    if issubclass(type(value), (list, tuple)):
        return "a list"
    if issubclass(type(value), (dict, FrozenDict)):
        return "an object"
    return str(type(value).__name__)


def need_str(value: object, field: str, *, non_empty: bool = False) -> str:
    """``value`` as an exact ``str`` of Unicode scalar values.

    A str subclass is copied into a plain str (read with str's own methods),
    so nothing set on it later shows through a message; text holding lone
    surrogates (which no provider can encode) is refused.
    """
    if type(value) is not str:
        if not issubclass(type(value), str):
            raise InvalidMessageError(field, f"expected a string, got {kind_of(value)}")
        value = str.__str__(value)
    if not value.isascii():
        check_scalar_text(value, field)
    if non_empty and not value:
        raise InvalidMessageError(field, "must not be empty")
    return value


def check_scalar_text(text: str, field: str) -> None:
    """Refuse ``text`` (an exact str) if it holds a lone surrogate."""
    if found := _SURROGATE.search(text):
        problem = (
            f"text holds a lone surrogate U+{ord(found[0]):04X} at position {found.start()}; "
            "it is not valid Unicode and cannot be sent"
        )
        raise InvalidMessageError(field, problem)


def clean_str(value: object) -> bool:
    """Whether ``value`` is an exact str known to need no further check (ASCII)."""
    return type(value) is str and value.isascii()


def need_bool(value: object, field: str) -> bool:
    if type(value) is not bool:
        raise InvalidMessageError(field, f"expected a boolean, got {kind_of(value)}")
    return value


def need_choice(value: object, field: str, choices: tuple[str, ...]) -> str:
    if type(value) is not str or value not in choices:
        allowed = ", ".join(repr(choice) for choice in choices)
        shown = repr(need_str(value, field)) if issubclass(type(value), str) else kind_of(value)
        raise InvalidMessageError(field, f"expected one of {allowed}, got {shown}")
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
    """An absolute http(s) URL that an HTTP client can use.

    Refused: other schemes, no host, whitespace or control characters, a port
    that is not 0-65535, and a host that is neither an IP address nor a valid
    (internationalized) domain name.
    """
    url = need_str(value, field)
    problem = _url_problem(url)
    if problem is not None:
        shown = url if len(url) <= 80 else url[:77] + "..."
        raise InvalidMessageError(field, f"{shown!r} is not an absolute http(s) URL ({problem})")
    return url


def _url_problem(url: str) -> str | None:
    if _URL_BAD_CHAR.search(url):
        return "it holds whitespace, a control character or a backslash"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        return str(err)
    if parts.scheme not in ("http", "https"):
        return "the scheme must be http or https"
    host = parts.hostname
    if not host:
        return "no host"
    if port is not None and port > 65535:
        return "the port is out of range"
    return _host_problem(host, parts.netloc)


def _host_problem(host: str, netloc: str) -> str | None:
    if "[" in netloc:
        import ipaddress

        try:
            ipaddress.IPv6Address(host.partition("%")[0])
        except ValueError:
            return f"{host!r} is not an IPv6 address"
        return None
    name = host.removesuffix(".")
    if not name.isascii():
        try:
            name = _idna(name)
        except (UnicodeError, ValueError):
            return f"{host!r} is not a valid internationalized domain name"
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in name.split(".")):
        return f"{host!r} is not a valid host name"
    return None


def _idna(name: str) -> str:
    """``name`` in ASCII, as the HTTP client encodes it (IDNA 2008, ``idna``)."""
    try:
        import idna  # a dependency of the HTTP client; loaded for non-ASCII hosts only
    except ImportError:  # pragma: no cover - idna always comes with httpx2
        return name.encode("idna").decode("ascii")
    return str(idna.encode(name.lower()).decode("ascii"))


class _Base64Memo:
    """Remembers base64 strings already found canonical.

    Reading the data is the only O(bytes) step of validation. Histories are
    re-validated every turn with the same image strings, often as new string
    objects (read back from a store). A string is looked up by its length and
    a few slices of it, then compared with the one kept: the same object
    compares in O(1), an equal copy at memory speed (``memcmp``), about three
    times faster than hashing it. Two strings that share a key replace each
    other (a miss, then a full check: never a wrong answer). Bounded in
    bytes; only strings of ``min_len`` or more are kept; safe across threads.
    """

    def __init__(self, max_bytes: int = 64 * 1024 * 1024, min_len: int = 4096) -> None:
        self._seen: OrderedDict[tuple[int, str], str] = OrderedDict()
        self._bytes = 0
        self._max_bytes = max_bytes
        self._min_len = min_len
        self._lock = threading.Lock()

    @staticmethod
    def _key(data: str) -> tuple[int, str]:
        size = len(data)
        middle = size // 2
        return size, data[:64] + data[middle : middle + 64] + data[-64:]

    def __contains__(self, data: str) -> bool:
        if len(data) < self._min_len:
            return False
        key = self._key(data)
        with self._lock:
            kept = self._seen.get(key)
        if kept is None or kept != data:  # compared outside the lock: O(bytes)
            return False
        with self._lock:
            if key in self._seen:
                self._seen.move_to_end(key)
        return True

    def add(self, data: str) -> None:
        if len(data) < self._min_len or len(data) > self._max_bytes:
            return
        key = self._key(data)
        with self._lock:
            kept = self._seen.get(key)
            if kept is data:
                return
            if kept is not None:  # another string with the same key: the newer is kept
                del self._seen[key]
                self._bytes -= len(kept)
            self._seen[key] = data
            self._bytes += len(data)
            while self._bytes > self._max_bytes:
                _, old = self._seen.popitem(last=False)
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
    return freeze_object(value, field)
