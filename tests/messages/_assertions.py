"""One way to check an InvalidMessageError, as a user would see it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from turnkit import InvalidMessageError


def assert_invalid(call: Callable[[], object], path: str, problem: str = "") -> InvalidMessageError:
    """``call()`` raises InvalidMessageError at ``path``, its text naming ``problem``."""
    with pytest.raises(InvalidMessageError) as caught:
        call()
    err = caught.value
    seen = f"got path {err.path!r}, message {str(err)!r}"
    assert isinstance(err, ValueError), seen
    assert err.code == "INVALID_MESSAGE", seen
    assert err.path == path, seen
    assert str(err).startswith(f"{path}: " if path else problem), seen
    assert problem in str(err), seen
    return err
