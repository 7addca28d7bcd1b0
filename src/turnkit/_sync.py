"""Sync twins of async entry points, usable with or without a running loop."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion and return its result.

    Without an event loop in this thread, ``asyncio.run`` runs it here. When
    a loop is running (a notebook, an async framework), it runs on a fresh
    loop in a worker thread, with this thread's context variables, and this
    thread waits for it.
    """
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    import contextvars
    from concurrent.futures import ThreadPoolExecutor

    context = contextvars.copy_context()
    with ThreadPoolExecutor(1, thread_name_prefix="turnkit-sync") as pool:
        return pool.submit(context.run, asyncio.run, coroutine).result()
