"""Storing an input under an idempotency key that another process may be storing too."""

from __future__ import annotations

from typing import Any

from turnkit.sessions.records import Receipt
from turnkit.sessions.store import NewInput

__all__ = ["accept_once"]


def accept_once(store: Any, session_id: str, new: NewInput) -> Receipt:
    """``store.accept_input``, where a concurrent insert of the same key is a duplicate.

    On Postgres two transactions can both find the key unused and both insert;
    the second fails on the unique key. The key is then stored: asking again
    returns the first receipt, marked ``duplicate``.
    """
    return store.accept_input(session_id, new)  # which retries such a collision itself
