"""Ids in each provider's grammar and the signatures the fakes issue and check.

Signatures are HMACs under one fixed key, so they are deterministic and stay
valid across fake instances (a real signature also outlives its request), but
a signature bound to another model, an empty one or a made-up one is refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import string
from typing import Final

_KEY: Final = b"turnkit-fakes-signing-key"
_ALNUM: Final = string.ascii_letters + string.digits


def random_alnum(length: int) -> str:
    """Random ``[A-Za-z0-9]`` string."""
    return "".join(secrets.choice(_ALNUM) for _ in range(length))


def random_hex(length: int) -> str:
    """Random lowercase hex string."""
    return secrets.token_hex((length + 1) // 2)[:length]


def mac(*parts: str) -> bytes:
    """HMAC-SHA256 over the parts, joined unambiguously."""
    return hmac.new(_KEY, "\x1f".join(parts).encode(), hashlib.sha256).digest()


def sign(*parts: str) -> str:
    """A standard-base64 signature over the parts (Anthropic ``thinking.signature``)."""
    return base64.b64encode(b"EsIG" + mac(*parts)).decode()


def signature_ok(signature: object, *parts: str) -> bool:
    """Whether ``signature`` is what :func:`sign` or :func:`sign_bytes` issued for ``parts``."""
    if not isinstance(signature, str) or not signature:
        return False
    raw = decode_b64(signature)
    return raw is not None and hmac.compare_digest(raw[-32:], mac(*parts)) and len(raw) > 32


def sign_bytes(*parts: str) -> str:
    """A url-safe base64 signature (Gemini ``thoughtSignature``, OpenAI ``encrypted_content``)."""
    return base64.urlsafe_b64encode(b"CiQB" + mac(*parts)).decode()


def decode_b64(value: str) -> bytes | None:
    """Decode standard or url-safe base64, tolerating missing padding."""
    normal = value.replace("-", "+").replace("_", "/").rstrip("=")
    try:
        return base64.b64decode(normal + "=" * (-len(normal) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
