"""The memo of canonical base64 strings: bounded, and never a source of errors."""

from __future__ import annotations

import base64
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from turnkit import InvalidMessageError
from turnkit.messages._checks import _Base64Memo, check_base64


def b64(size: int) -> str:
    return base64.b64encode(os.urandom(size)).decode()


def test_memo_is_bounded_in_bytes_and_evicts_the_oldest() -> None:
    memo = _Base64Memo(max_bytes=30_000, min_len=100)
    first, second, third = b64(9_000), b64(9_000), b64(9_000)  # 12,000 chars each
    for data in (first, second, first, third):
        memo.add(data)
    assert first not in memo and second in memo and third in memo
    assert memo._bytes == len(second) + len(third)


def test_short_strings_are_not_kept() -> None:
    memo = _Base64Memo(min_len=100)
    memo.add("AAAA")
    assert "AAAA" not in memo


def test_a_remembered_string_is_still_checked_when_it_differs() -> None:
    good = b64(6_000)
    check_base64(good, "data")
    with pytest.raises(InvalidMessageError, match="not canonical base64"):
        check_base64(good[:-4] + "!!!!", "data")


def test_concurrent_validation_never_raises() -> None:
    memo = _Base64Memo(max_bytes=50_000, min_len=100)
    samples = [b64(3_000) for _ in range(40)]

    def churn(offset: int) -> None:
        for index in range(400):
            data = samples[(index + offset) % len(samples)]
            memo.add(data)
            _ = data in memo

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(churn, range(4)))
    assert memo._bytes <= 50_000
