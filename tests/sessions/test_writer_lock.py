"""The SQLite writer lock: one holder at a time, urgent writers first, none starved."""

from __future__ import annotations

import threading
import time

from turnkit.sessions.db.writer_lock import URGENT_RUN, WriterLock


def _queue_up(lock: WriterLock, lanes: list[bool], order: list[str]) -> list[threading.Thread]:
    """Start one waiter per lane (True: urgent) while ``lock`` is held, in that order."""
    threads = []
    for i, urgent in enumerate(lanes):
        name = f"{'u' if urgent else 'n'}{i}"

        def take(name: str = name, urgent: bool = urgent) -> None:
            lock.acquire(urgent)
            order.append(name)
            lock.release()

        thread = threading.Thread(target=take)
        thread.start()
        threads.append(thread)
        deadline = time.monotonic() + 5
        while sum(lock._waiting) < i + 1:  # this waiter is queued before the next starts
            assert time.monotonic() < deadline
            time.sleep(0.001)
    return threads


def test_an_urgent_writer_goes_before_the_writers_already_waiting() -> None:
    lock, order = WriterLock(), []
    lock.acquire()
    threads = _queue_up(lock, [False, False, True], order)
    lock.release()
    for thread in threads:
        thread.join(5)
    assert order[0] == "u2"
    assert sorted(order[1:]) == ["n0", "n1"]


def test_urgent_writers_do_not_starve_the_others() -> None:
    lock, order = WriterLock(), []
    lock.acquire()
    lanes = [False] + [True] * (URGENT_RUN + 2)
    threads = _queue_up(lock, lanes, order)
    lock.release()
    for thread in threads:
        thread.join(5)
    # URGENT_RUN urgent writers in a row, then the one that waited all along.
    assert order.index("n0") == URGENT_RUN
    assert len(order) == len(lanes)


def test_one_holder_at_a_time_under_many_threads() -> None:
    lock = WriterLock()
    inside, most, done = [0], [0], []

    def work(i: int) -> None:
        for _ in range(200):
            lock.acquire(urgent=i % 3 == 0)
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            inside[0] -= 1
            lock.release()
        done.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(done) == list(range(8))
    assert most[0] == 1
    assert lock._waiting == [0, 0] and not lock._held
