"""What an evaluation record keeps of a run's content: nothing, redacted, or all.

``redacted`` masks what must not sit in an evaluation store: API keys
(``sk-...`` and the usual provider prefixes), bearer tokens, values of
secret-looking fields, email addresses, and binary data (base64 sources,
``data:`` URLs, long base64 runs). Both ``redacted`` and ``full`` are JSON
text cut to ``max_bytes`` (on a character boundary), with a ``truncated``
flag.
"""

from __future__ import annotations

import json
import re
from typing import Any

from turnkit.orchestrator.evaluation import PayloadMode

__all__ = ["bounded_json", "redact", "redact_text", "stored_payload"]

_SECRET_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"data:[\w.+-]+/[\w.+-]+;base64,[A-Za-z0-9+/=\s]*"), "[REDACTED_DATA_URL]"),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]+=*"), "Bearer [REDACTED]"),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), "[REDACTED_KEY]"),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|github_pat)_[A-Za-z0-9_]{16,}"), "[REDACTED_KEY]"),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), "[REDACTED_KEY]"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), "[REDACTED_KEY]"),
    (re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "[REDACTED_KEY]"),
    (
        re.compile(r"(?i)\b(api[_-]?key|password|passwd|secret|access[_-]?token)(\s*[:=]\s*)\S+"),
        r"\1\2[REDACTED]",
    ),
    (re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}"), "[EMAIL]"),
    (re.compile(r"[A-Za-z0-9+/]{120,}={0,2}"), "[BASE64]"),
)

_SECRET_KEYS = re.compile(
    r"(?i)^(authorization|api[_-]?key|x-api-key|password|passwd|secret|token|access[_-]?token)$"
)


def redact(value: Any) -> Any:
    """A copy of JSON ``value`` with secrets and binary data masked."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        if value.get("type") == "base64" and isinstance(value.get("data"), str):
            return {**redact(_without(value, "data")), "data": f"[BASE64 {len(value['data'])}]"}
        return {
            key: "[REDACTED]" if _SECRET_KEYS.match(str(key)) else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    return value


def redact_text(text: str) -> str:
    """``text`` with secrets, emails and base64 data masked."""
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _without(value: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in value.items() if k != key}


def bounded_json(value: Any, max_bytes: int) -> tuple[str, bool]:
    """``value`` as JSON text of at most ``max_bytes`` UTF-8 bytes, and whether it was cut."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    data = text.encode()
    if len(data) <= max_bytes:
        return text, False
    return data[:max_bytes].decode(errors="ignore"), True


def stored_payload(value: Any, mode: PayloadMode, max_bytes: int) -> tuple[str | None, bool]:
    """What a record keeps of ``value``: None, or bounded (redacted) JSON text."""
    if mode == "none":
        return None, False
    if mode == "redacted":
        value = redact(value)
    return bounded_json(value, max_bytes)
