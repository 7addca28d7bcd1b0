"""A private event loop in a daemon thread, for work that outlives its callers' loops.

The one such helper in turnkit. An ACP session's process and connection are
bound to the event loop that opened them, but ``prompt_sync`` runs each call
on a new loop: the session lives here, and every caller (any loop, any
thread) reaches it through :meth:`LoopThread.call`. Online evaluation scores
runs here too, handed over with :meth:`LoopThread.submit`, so scoring never
delays a run and survives the ``_sync`` twins closing their loops.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["LoopThread"]

T = TypeVar("T")

_CLEANUP_BOUND_S = 15.0
"""How long a cancelled caller waits for the call's own cleanup to finish."""


class LoopThread:
    """An event loop running in its own daemon thread until :meth:`stop`."""

    def __init__(self, name: str) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            # As asyncio.run does: nothing is left pending on a closed loop.
            tasks = asyncio.all_tasks(self._loop)
            for task in tasks:
                task.cancel()
            gathered = asyncio.gather(*tasks, return_exceptions=True)
            self._loop.run_until_complete(gathered)
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.run_until_complete(self._loop.shutdown_default_executor())
            self._loop.close()

    async def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run ``coroutine`` on this loop and return its result here.

        Cancelling the caller cancels the coroutine there and waits (bounded)
        until it has finished its cleanup, so that a cancelled call is over
        when the caller's CancelledError is raised.
        """
        caller = asyncio.get_running_loop()
        outcome: asyncio.Future[T] = caller.create_future()
        tasks: list[asyncio.Task[T]] = []

        def report(task: asyncio.Task[T]) -> None:
            with contextlib.suppress(RuntimeError):  # the caller's loop is gone
                caller.call_soon_threadsafe(_settle, outcome, task)

        def start() -> None:
            task = self._loop.create_task(coroutine)
            tasks.append(task)
            task.add_done_callback(report)

        self._loop.call_soon_threadsafe(start)
        try:
            return await asyncio.shield(outcome)
        except asyncio.CancelledError:
            # start() ran before this callback: call_soon_threadsafe keeps order.
            self._loop.call_soon_threadsafe(lambda: tasks[0].cancel())
            await asyncio.wait({outcome}, timeout=_CLEANUP_BOUND_S)
            if outcome.done() and not outcome.cancelled():
                outcome.exception()  # retrieved: the caller was cancelled anyway
            raise

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coroutine`` on this loop, from any thread; its future, to wait on or not."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    async def stop(self) -> None:
        """Stop the loop and wait (bounded) for the thread to end."""
        self.stop_nowait()
        await asyncio.to_thread(self._thread.join, 5.0)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the loop (its tasks are cancelled) and wait for the thread; blocking."""
        self.stop_nowait()
        self._thread.join(timeout)

    def stop_nowait(self, cleanup: Coroutine[Any, Any, Any] | None = None) -> None:
        """Run ``cleanup`` there (errors ignored), then stop; from anywhere.

        For finalizers: nothing waits for it.
        """

        async def finish() -> None:
            if cleanup is not None:
                with contextlib.suppress(Exception):
                    await cleanup
            self._loop.stop()

        try:
            self._loop.call_soon_threadsafe(lambda: self._loop.create_task(finish()))
        except RuntimeError:  # already closed
            if cleanup is not None:
                cleanup.close()


def _settle(outcome: asyncio.Future[T], task: asyncio.Task[T]) -> None:
    """Copy the state of ``task`` (another loop's) into ``outcome``."""
    if outcome.done():
        return
    if task.cancelled():
        outcome.cancel()
    elif (error := task.exception()) is not None:
        outcome.set_exception(error)
    else:
        outcome.set_result(task.result())
