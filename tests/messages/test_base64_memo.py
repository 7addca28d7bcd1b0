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


def test_an_equal_copy_of_a_remembered_string_is_found() -> None:
    memo = _Base64Memo(min_len=100)
    data = b64(30_000)
    memo.add(data)
    copy = data[:-4] + data[-4:].swapcase().swapcase()
    assert copy is not data and copy in memo


def test_strings_sharing_a_key_are_never_taken_for_each_other() -> None:
    memo = _Base64Memo(min_len=100)
    data = b64(30_000)
    # Same length and the same first, middle and last slices: only the rest differs.
    other = data[:1000] + ("B" if data[1000] != "B" else "C") + data[1001:]
    assert memo._key(other) == memo._key(data)
    memo.add(data)
    assert other not in memo
    memo.add(other)
    assert other in memo and data not in memo and memo._bytes == len(other)
    with pytest.raises(InvalidMessageError, match="not canonical base64"):
        check_base64(data[:1000] + "!" + data[1001:], "data")
