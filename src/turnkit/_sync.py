"""Sync and async, bridged once for the whole package.

- :func:`run_sync`: the sync twins of async entry points, with or without a
  running loop.
- :func:`maybe_await`: a user callback's return value, awaited if it is
  awaitable (callbacks may be sync or async).
- :func:`call_sync_or_async`: call a user function the way turnkit always
  does: await an async one, run a sync one in a daemon worker thread (reused
  from call to call) so it does not hold the event loop up, and one that
  never returns can be abandoned. The loop waits for a sync function's
  answer directly for at most :data:`DIRECT_WAIT_S` (50 us), which is less
  than waking the loop from the worker costs, with the worker held to the
  loop's core meanwhile; one still running then is let free and awaited
  through the loop. The workers live in :mod:`turnkit._workers`.
- :func:`call_within`: the same with a deadline (:class:`CallTimeout`), as
  tools run: a sync function's deadline is a timer on its own future, made
  only if the call is still running after that direct wait.

``asyncio`` and ``inspect`` are imported inside the functions: loading them
at import time costs ``import turnkit`` tens of milliseconds.
"""

from __future__ import annotations

from _thread import allocate_lock
from collections.abc import Callable, Coroutine
from contextvars import copy_context
from os import write as _write
from select import select as _select
from time import monotonic as _monotonic
from typing import Any, TypeVar

from turnkit._workers import workers

__all__ = [
    "CallTimeout",
    "call_sync_or_async",
    "call_within",
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
    return await call_within(fn, args, kwargs, None)


class CallTimeout(Exception):
    """A call's deadline passed: an async one was cancelled, a sync one abandoned."""


async def call_within(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    timeout_s: float | None,
    *,
    is_async: bool | None = None,
) -> Any:
    """:func:`call_sync_or_async` with a deadline: past ``timeout_s`` (None: no
    limit), :class:`CallTimeout`; a ``TimeoutError`` the function raises itself
    passes through as it is. ``is_async`` is :func:`is_async_callable` of
    ``fn`` when the caller knows it already.

    A sync function costs one hand-over to a worker thread and one back (see
    :func:`run_in_thread`); its deadline needs a timer only if it is still
    running after :data:`DIRECT_WAIT_S`. What it returns, if awaitable, is
    awaited within the same deadline.
    """
    if is_async is None:
        is_async = is_async_callable(fn)
    if is_async:
        value = fn(*args, **kwargs)
    else:
        start = 0.0 if timeout_s is None else _monotonic()
        value = await _in_thread(fn, args, kwargs, timeout_s)
        if not _awaitable(value):
            return value
        if timeout_s is not None:  # the rest of the same deadline
            timeout_s -= _monotonic() - start
    if timeout_s is None:
        return await value
    return await _within(value, timeout_s)


async def _within(value: Any, timeout_s: float) -> Any:
    """``await value``, cancelled past ``timeout_s`` (:class:`CallTimeout`).

    What ``asyncio.timeout`` does, with one timer and no context manager
    (which costs twice as much as the timer): past the deadline the task is
    cancelled; the cancellation it caused is taken back (``uncancel``) on
    the way out, and becomes :class:`CallTimeout` unless someone else also
    cancelled the task.
    """
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = _Deadline(asyncio.current_task())
    timer = loop.call_at(loop.time() + timeout_s, deadline.expire)
    try:
        result = await value
    except asyncio.CancelledError:
        if deadline.taken_back():
            raise CallTimeout from None
        raise
    except BaseException:
        deadline.taken_back()
        raise
    finally:
        timer.cancel()
    deadline.taken_back()
    return result


class _Deadline:
    """The deadline of one awaited call: cancels its task once, when it passes."""

    __slots__ = ("cancelling", "expired", "task")

    def __init__(self, task: Any) -> None:
        self.task = task
        self.cancelling = task.cancelling()  # cancellations asked for before this call
        self.expired = False

    def expire(self) -> None:
        self.expired = True
        self.task.cancel()

    def taken_back(self) -> bool:
        """Take back the cancellation the deadline caused, if it did; whether
        it was the only one asked for since the call began."""
        return self.expired and self.task.uncancel() <= self.cancelling


def _awaitable(value: object) -> bool:
    kind = type(value)
    if kind is int or kind is str or value is None:  # what most tools return
        return False
    import inspect

    return inspect.isawaitable(value)


async def run_in_thread(fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a daemon worker thread, with this context's variables.

    Unlike ``asyncio.to_thread`` this never uses the loop's default executor,
    which ``asyncio.run`` joins at exit: a function that never returns can be
    abandoned (cancel the awaiting task, e.g. with a timeout) and neither the
    loop nor the interpreter waits for it. Worker threads are reused (one
    hand-over each way per call, no thread start): an abandoned call keeps
    its thread, and the next call gets another. The event loop waits for the
    answer directly for at most :data:`DIRECT_WAIT_S`, then goes on with its
    other work until the function returns.
    """
    return await _in_thread(fn, args, kwargs, None)  # type: ignore[no-any-return]


async def _in_thread(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], timeout_s: float | None
) -> Any:
    """:func:`run_in_thread`; past ``timeout_s`` the call is abandoned (:class:`CallTimeout`).

    The loop rings an idle worker's doorbell (one byte down its pipe) and
    waits for the answer byte directly, for at most :data:`DIRECT_WAIT_S`: a
    call that is back by then costs one hand-over each way and nothing else.
    For those microseconds the worker may run only on the loop's current
    core (:meth:`~turnkit._workers.Worker.stay_on_this_core`): the loop waits anyway, and the
    hand-over each way is then a switch between two threads of one core
    instead of waking an idle core (50-100 us on a virtual machine). A call
    still running after the direct wait is let run on any core again and
    awaited through the loop as usual, so a slow function holds the loop up
    for those microseconds only and keeps its parallelism.
    """
    call = _Handover(fn, args, kwargs)
    worker = workers().take()
    worker.call = call
    worker.stay_on_this_core()
    _write(worker.doorbell, b"\0")
    wait = DIRECT_WAIT_S if timeout_s is None or timeout_s > DIRECT_WAIT_S else timeout_s
    if worker.answer < _FD_SETSIZE and _select((worker.answer,), (), (), wait)[0]:
        return worker.collect(call)
    worker.free_to_move()
    import asyncio

    loop = asyncio.get_running_loop()
    call.loop = loop
    future = call.future = loop.create_future()
    if not call.claim.acquire(False):  # it came back meanwhile: its answer byte is on its way
        return worker.collect(call)
    if wait is timeout_s:
        future.cancel()  # nobody awaits it: the outcome, when it comes, is dropped
        raise CallTimeout
    if timeout_s is None:
        return await future
    timer = loop.call_later(timeout_s - wait, _expire, future)
    try:
        return await future
    finally:
        timer.cancel()


DIRECT_WAIT_S = 50e-6
"""How long the event loop waits for a sync function's answer before it
awaits it through the loop (see :func:`run_in_thread`)."""

_FD_SETSIZE = 1024  # select() takes no higher descriptor: such a worker is awaited through the loop


class _Handover:
    """One call handed to a worker thread, and its outcome handed back.

    ``claim`` decides, once, how the outcome goes back: the worker takes it
    when the call is done and writes its answer byte, which the caller
    reads; the caller takes it when it stops waiting directly, after setting
    ``loop`` and ``future``, and the worker then settles the future through
    the loop. Whoever loses knows the other's way.
    """

    __slots__ = ("args", "claim", "context", "fn", "future", "kwargs", "loop", "ok", "outcome")

    def __init__(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.context = copy_context()
        self.claim = allocate_lock()
        self.future: Any = None
        self.loop: Any = None
        self.ok = False
        self.outcome: Any = None

    def run(self) -> None:
        """Run the call (in a worker)."""
        try:
            self.outcome, self.ok = self.context.run(self.fn, *self.args, **self.kwargs), True
        except BaseException as err:  # handed to the caller, as to_thread does
            self.outcome = err

    def settle_later(self) -> None:
        """Hand the outcome to the caller's future, through its loop."""
        import contextlib

        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            self.loop.call_soon_threadsafe(_settle, self.future, self.ok, self.outcome)

    def value(self) -> Any:
        """The outcome: what the function returned, or what it raised."""
        if self.ok:
            return self.outcome
        error, self.outcome = self.outcome, None
        raise error


def _expire(future: Any) -> None:
    if not future.done():
        future.set_exception(CallTimeout())


def _settle(future: Any, ok: bool, outcome: Any) -> None:
    if future.done():  # abandoned: cancelled or timed out
        return
    if ok:
        future.set_result(outcome)
    else:
        future.set_exception(outcome)
