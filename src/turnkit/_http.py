"""HTTP details the providers, channels and server share: headers, Retry-After, problems.

Header maps come in many kinds (plain dicts, httpx's and Starlette's
case-insensitive maps, slack_sdk's dicts of lists); these helpers accept
any ``Mapping`` and look names up case-insensitively.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

__all__ = ["PROBLEM_TYPE", "header", "problem_body", "retry_after_seconds"]

PROBLEM_TYPE = "application/problem+json"


def header(headers: Mapping[str, Any] | None, name: str) -> Any:
    """A header by case-insensitive name (the first value, when a list); None if absent."""
    if headers is None:
        return None
    value = headers.get(name)
    if value is None:
        lowered = name.lower()
        value = next((item for key, item in headers.items() if key.lower() == lowered), None)
    if isinstance(value, list):
        return value[0] if value else None
    return value


def retry_after_seconds(headers: Mapping[str, Any] | None) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``retry-after`` (seconds, not dates)."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            seconds = float(header(headers, name)) / scale
        except (TypeError, ValueError):
            continue
        if seconds >= 0 and math.isfinite(seconds):
            return seconds
    return None


def problem_body(status: int, detail: str) -> dict[str, Any]:
    """An RFC 9457 ``application/problem+json`` body."""
    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = "Error"
    return {"type": "about:blank", "title": title, "status": status, "detail": detail}
