"""The worker threads that run sync functions for :mod:`turnkit._sync`.

Each worker is a daemon thread with two pipes: a doorbell it waits on and an
answer pipe its caller reads. A caller takes an idle worker (the one used
last: its core is the likeliest to be awake), hands it one call, and gives
it back once the outcome is in; a call that never returns keeps its worker.
Pipes because the kernel can hand a pipe's reader to the writer's core
directly; see :func:`turnkit._sync.run_in_thread` for how a call uses them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from os import read as _read
from os import write as _write
from time import monotonic as _monotonic
from typing import TYPE_CHECKING, Any, Protocol

__all__ = ["Worker", "Workers", "workers"]


if TYPE_CHECKING:

    class Call(Protocol):
        """What a worker needs of a call (``turnkit._sync._Handover``)."""

        claim: Any

        def run(self) -> None: ...

        def settle_later(self) -> None: ...

        def value(self) -> Any: ...


class Worker:
    """A daemon thread that runs one call at a time, rung through its doorbell pipe."""

    __slots__ = (
        "answer",
        "answer_in",
        "call",
        "core",
        "cores",
        "doorbell",
        "doorbell_out",
        "idle_since",
        "pool",
        "thread_id",
    )

    def __init__(self, pool: Workers) -> None:
        import threading

        self.pool = pool
        self.doorbell_out, self.doorbell = os.pipe()
        self.answer, self.answer_in = os.pipe()
        self.call: Call | None = None
        self.idle_since = 0.0
        self.thread_id = 0  # set by the thread when it starts
        self.cores: Any = None  # the cores it may run on when free to move
        self.core = -1  # the one core it is held to, or -1
        threading.Thread(target=self.serve, name="turnkit-worker", daemon=True).start()

    def stay_on_this_core(self) -> None:
        """Let the worker run only on the caller's core, while the caller waits for it.

        A Linux scheduling hint, skipped where it is not available (no
        ``sched_getcpu``, another platform, or a core outside the worker's
        set). Checked with one vDSO call; changed with a system call only
        when the caller moved to another core or the worker was let free.
        """
        getcpu = _getcpu()
        if getcpu is None or not self.thread_id:
            return
        core = getcpu()
        if core != self.core and core >= 0:
            try:
                os.sched_setaffinity(self.thread_id, (core,))
            except OSError:
                return
            self.core = core

    def free_to_move(self) -> None:
        """Let the worker run on any of its cores again (its call is a slow one)."""
        if self.core >= 0:
            self.core = -1
            with contextlib.suppress(OSError):
                os.sched_setaffinity(self.thread_id, self.cores)

    def serve(self) -> None:
        import threading

        if _getcpu() is not None:
            self.cores = os.sched_getaffinity(0)
            self.thread_id = threading.get_native_id()
        while _read(self.doorbell_out, 1) == b"\0":
            call, self.call = self.call, None
            assert call is not None
            call.run()
            if call.claim.acquire(False):  # the caller still waits directly
                _write(self.answer_in, b"\0")  # it reads this, then gives the worker back
            else:
                self.pool.give_back(self)
                call.settle_later()
            del call  # nothing of a finished call is kept alive
        self.close()

    def collect(self, call: Call) -> Any:
        """Read the answer byte of ``call``, give the worker back, and return its outcome."""
        _read(self.answer, 1)
        self.pool.give_back(self)
        return call.value()

    def retire(self) -> None:
        _write(self.doorbell, b"q")

    def close(self) -> None:
        for fd in (self.doorbell_out, self.doorbell, self.answer, self.answer_in):
            with contextlib.suppress(OSError):
                os.close(fd)


class Workers:
    """The idle workers, most recently used last (the one taken next).

    A call takes an idle worker, or starts one, and gives it back when its
    outcome is handed over: an abandoned call keeps its worker, and the next
    call gets another. A worker idle for ``idle_s`` is retired when the next
    call comes, so the threads kept follow the recent number of calls at once.
    """

    def __init__(self, idle_s: float = 60.0) -> None:
        import threading

        self._lock = threading.Lock()
        self._idle: list[Worker] = []
        self._idle_s = idle_s
        self.started: set[Worker] = set()

    def take(self) -> Worker:
        stale = None
        with self._lock:
            idle = self._idle
            worker = idle.pop() if idle else None
            if idle and idle[0].idle_since < _monotonic() - self._idle_s:
                stale = idle.pop(0)
        if stale is not None:
            self.started.discard(stale)
            stale.retire()
        if worker is None:
            worker = Worker(self)
            self.started.add(worker)
        return worker

    def give_back(self, worker: Worker) -> None:
        worker.idle_since = _monotonic()
        with self._lock:
            self._idle.append(worker)


_pool: Workers | None = None
_sched_getcpu: Any = False  # not looked up yet


def _getcpu() -> Callable[[], int] | None:
    """libc's ``sched_getcpu`` where the worker's cores can be chosen (Linux), else None."""
    global _sched_getcpu
    if _sched_getcpu is False:
        _sched_getcpu = None
        if hasattr(os, "sched_setaffinity"):
            try:
                import ctypes

                _sched_getcpu = ctypes.CDLL(None).sched_getcpu
                _sched_getcpu.restype = ctypes.c_int
                _sched_getcpu.argtypes = ()
            except (OSError, AttributeError):
                _sched_getcpu = None
    return _sched_getcpu  # type: ignore[no-any-return]


def workers() -> Workers:
    global _pool
    if _pool is None:
        _pool = Workers()
        os.register_at_fork(after_in_child=_forget_workers)  # their threads are not in a child
    return _pool


def _forget_workers() -> None:
    global _pool
    if _pool is not None:
        for worker in _pool.started:
            worker.close()
    _pool = None
