"""Small value helpers of turnkit (``turnkit._values``)."""

from __future__ import annotations

import uuid

from turnkit._values import uuid4_str


def test_uuid4_str_is_a_canonical_random_uuid() -> None:
    made = [uuid4_str() for _ in range(2000)]
    for text in made:
        value = uuid.UUID(text)
        assert str(value) == text  # canonical: lower-case hex, 8-4-4-4-12
        assert value.version == 4 and value.variant == uuid.RFC_4122
    assert len(set(made)) == len(made)
