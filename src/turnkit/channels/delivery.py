"""The delivery task: posts the replies the outbox holds, in order, with retries.

It runs on its own loop thread (:class:`turnkit._loop_thread.LoopThread`),
so it outlives the ``_sync`` twins' short-lived loops, and is woken by the
commit that queues a reply in this process, by changes other processes make
(the App's notifier), by a delivery finishing and by the earliest retry
coming due. Each claimed row is expanded by its channel into posts; every
post made is recorded at once, so a retry or a restart never repeats one.

Conversations do not wait for each other. Each claimed row is delivered by
a task of its own (at most :data:`MAX_IN_FLIGHT` at once) while the loop
goes on claiming rows of other conversations, so one slow or refused post
holds up only its own conversation. Back-off is per conversation (a
session: one Slack thread, one Linear agent session): a ``Retry-After`` or
a retry's delay is written on that conversation's oldest row, which keeps
its later rows behind it and no one else's. Slack's ``chat.postMessage``
limit is about one message per second per channel, with a workspace-wide
limit above it; a 429 holds only the thread whose post got it. Another
thread of the same channel is still tried at once: if the limit covers it
too, its own 429 holds it, so no conversation waits longer than a
``Retry-After`` it was given (one extra request per thread, per limit).
Linear's 429s are handled the same way, per agent session.

Leases are held under the App's executor id. A process killed mid-post
leaves its rows leased; started again with the same executor id (give each
process a stable one, ``App(executor_id=...)`` or ``$TURNKIT_EXECUTOR_ID``),
it takes them back at once and resumes; another process takes them when
the row's lease lapses (:data:`LEASE_S`), or as soon as the executor's own
lease has (``turnkit_executors``: it died, or stopped). Delivery is at least once: a post is
recorded as made (``done``) as soon as the channel answers, and a row's
recorded posts are never made again; only a post whose answer was lost with
its process (sent, not yet recorded) can be made a second time.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import time
from typing import Any

from turnkit._loop_thread import LoopThread
from turnkit.channels import outbox
from turnkit.channels.base import GiveUp, RetryLater

__all__ = ["MAX_ATTEMPTS", "Delivery", "backoff", "lease_owner"]

MAX_ATTEMPTS = 8  # posts of one row tried this many times (about 2 minutes), then recorded
LEASE_S = 120.0  # a claimed row is another process's to take after this
MAX_IN_FLIGHT = 20  # rows (each of another conversation) delivered at once
IDLE_S = 5.0  # a look at the outbox at least this often (other processes' replies)
STOP_GRACE_S = 10.0  # how long a stopping App lets posts in flight finish

log = logging.getLogger("turnkit.channels")


def backoff(attempts: int) -> float:
    """Seconds before try ``attempts + 1``: 0.5 s doubling, capped at 60 s, with jitter."""
    base = min(60.0, 0.5 * 2**attempts)
    return base * (0.8 + 0.4 * random.random())


class Delivery:
    """Delivers outbox rows of the configured channels (``{provider: channel}``)."""

    def __init__(self, store: Any, channels: dict[str, Any], executor_id: str) -> None:
        self.store = store
        self.channels = channels
        self.owner = lease_owner(executor_id)  # whose leases are whose
        self._thread: LoopThread | None = None
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: Any = None
        self._stopping = False

    def start(self) -> None:
        self._thread = LoopThread("turnkit-channels")
        self._task = self._thread.submit(self._run())

    def wake(self) -> None:
        """Look at the outbox now (from any thread)."""
        loop, event = self._loop, self._event
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop has stopped
                loop.call_soon_threadsafe(event.set)

    async def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is None:
            return
        # Posts in flight finish (their answer is recorded), bounded; then the loop ends.
        self._stopping = True
        self.wake()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.wrap_future(self._task), STOP_GRACE_S)
        closers = [c.aclose() for c in self.channels.values()]
        with contextlib.suppress(Exception):
            await thread.call(_gather(closers))
        # The loop thread ends after its worker threads (claims in flight) have: then
        # every row this task still holds is free for the next start, at once.
        await thread.stop()
        await asyncio.to_thread(outbox.release, self.store, self.owner)

    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._event = event = asyncio.Event()
        in_flight: set[asyncio.Task[None]] = set()
        await self._take_back_own_leases()

        def finished(task: asyncio.Task[None]) -> None:
            in_flight.discard(task)
            event.set()  # a slot is free, and the conversation's next row may be due

        while not self._stopping:
            event.clear()
            free = MAX_IN_FLIGHT - len(in_flight)
            items, due = await self._claim(free) if free > 0 else ([], None)
            for item in items:
                task = asyncio.create_task(self._deliver(item))
                in_flight.add(task)
                task.add_done_callback(finished)
            if items and len(items) == free:
                continue  # more may be due once a slot is free
            wait = IDLE_S if due is None else min(IDLE_S, max(0.0, due - time.time()))
            with contextlib.suppress(TimeoutError):  # (wait_for may lose a cancel on 3.11)
                async with asyncio.timeout(wait):
                    await event.wait()
        if in_flight:  # posts in flight finish: their outcome is recorded
            await asyncio.gather(*in_flight, return_exceptions=True)

    async def _take_back_own_leases(self) -> None:
        """Rows an earlier run under this executor id held when it was killed: ours now."""
        try:
            await asyncio.to_thread(outbox.release, self.store, self.owner)
        except Exception:  # they lapse on their own (LEASE_S) if the database refuses now
            log.exception("turnkit channels: taking back this executor's leases failed")

    async def _claim(self, limit: int) -> tuple[list[outbox.OutboxItem], float | None]:
        """Due rows for this task (at most ``limit``), and when the next comes due."""
        providers = tuple(self.channels)
        try:
            claim = outbox.claim_due, self.store, self.owner, LEASE_S, providers, limit
            return await asyncio.to_thread(*claim)
        except Exception:  # the database went away for a moment: look again later
            log.exception("turnkit channels: reading the outbox failed")
            return [], None

    async def _deliver(self, item: outbox.OutboxItem) -> None:
        channel = self.channels[item.provider]
        try:
            await self._post_rest(channel, item)
        except RetryLater as error:
            if item.attempts + 1 >= MAX_ATTEMPTS:
                message = f"{error} (gave up after {item.attempts + 1} attempts)"
                await asyncio.to_thread(outbox.record_failure, self.store, item, message)
                return
            delay = error.delay_s if error.delay_s is not None else backoff(item.attempts)
            await asyncio.to_thread(outbox.retry_later, self.store, item, delay, str(error))
        except GiveUp as error:
            await asyncio.to_thread(outbox.record_failure, self.store, item, str(error))
        except Exception as error:  # a bug or an unexpected answer: recorded, not lost
            log.exception("turnkit channels: delivering outbox row %s failed", item.id)
            message = f"{type(error).__name__}: {error}"
            await asyncio.to_thread(outbox.record_failure, self.store, item, message)

    async def _post_rest(self, channel: Any, item: outbox.OutboxItem) -> None:
        """Make the row's posts not yet recorded, recording each as soon as it is made."""
        posts, done = channel.posts(item), item.done
        while True:
            if done < len(posts):
                await channel.post(posts[done], item)
                done += 1
            finished = done >= len(posts)
            progress = outbox.record_progress, self.store, item, done, finished, LEASE_S
            if not await asyncio.to_thread(*progress):
                log.warning("turnkit channels: outbox row %s was taken over; left to it", item.id)
                return
            if finished:
                return


def lease_owner(executor_id: str) -> str:
    """The ``lease_owner`` an executor id is stored as (it fits the 64-character column)."""
    if len(executor_id) <= 64:
        return executor_id
    return "sha256:" + hashlib.sha256(executor_id.encode()).hexdigest()[:57]


async def _gather(coroutines: list[Any]) -> None:
    await asyncio.gather(*coroutines, return_exceptions=True)
