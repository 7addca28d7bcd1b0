"""Sync and async, bridged once for the whole package.

- :func:`run_sync`: the sync twins of async entry points, with or without a
  running loop.
- :func:`maybe_await`: a user callback's return value, awaited if it is
  awaitable (callbacks may be sync or async).
- :func:`call_sync_or_async`: call a user function the way turnkit always
  does: await an async one, run a sync one in a daemon worker thread so it
  never blocks the event loop, and one that never returns can be abandoned.

``asyncio`` and ``inspect`` are imported inside the functions: loading them
at import time costs ``import turnkit`` tens of milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = [
    "call_sync_or_async",
    "is_async_callable",
    "maybe_await",
    "run_in_thread",
    "run_sync",
]

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


async def maybe_await(value: Any) -> Any:
    """``value``, awaited first when it is awaitable."""
    import inspect

    return await value if inspect.isawaitable(value) else value


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` gives a coroutine (async functions and ``async __call__``)."""
    import inspect

    method = type(fn).__call__ if not inspect.isroutine(fn) else None
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(method)


async def call_sync_or_async(fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``: awaited when async, else run in a worker thread.

    A sync function that returns an awaitable has that awaited too.
    """
    if is_async_callable(fn):
        return await fn(*args, **kwargs)
    return await maybe_await(await run_in_thread(fn, *args, **kwargs))


async def run_in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a new daemon thread, with this context's variables.

    Unlike ``asyncio.to_thread`` this never uses the loop's default executor,
    which ``asyncio.run`` joins at exit: a function that never returns can be
    abandoned (cancel the awaiting task, e.g. with a timeout) and neither the
    loop nor the interpreter waits for it.
    """
    import asyncio
    import contextlib
    import contextvars
    import threading

    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, outcome: Any) -> None:
        if future.done():  # abandoned: cancelled or timed out
            return
        if ok:
            future.set_result(outcome)
        else:
            future.set_exception(outcome)

    def work() -> None:
        try:
            outcome, ok = context.run(fn, *args, **kwargs), True
        except BaseException as err:  # handed to the awaiting task, as to_thread does
            outcome, ok = err, False
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(settle, ok, outcome)

    name = f"turnkit-worker-{getattr(fn, '__name__', 'fn')}"
    threading.Thread(target=work, name=name, daemon=True).start()
    return await future
