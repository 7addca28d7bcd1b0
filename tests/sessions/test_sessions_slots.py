"""A process's turn slots: one bound however runners start, waiters served in order."""

from __future__ import annotations

import asyncio
import threading

from turnkit.sessions.runtime.slots import Slots


async def test_a_freed_slot_goes_to_the_longest_waiter_and_nobody_jumps_the_line() -> None:
    slots = Slots(1)
    assert slots.try_take() and not slots.free()
    order: list[str] = []

    async def wait(name: str) -> None:
        await slots.take()
        order.append(name)

    first = asyncio.ensure_future(wait("first"))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(wait("second"))
    await asyncio.sleep(0)
    assert not slots.try_take()  # a waiter comes before a direct start
    slots.give()
    await first
    assert order == ["first"] and slots.used == 1
    slots.give()
    await second
    slots.give()
    assert order == ["first", "second"] and slots.used == 0 and slots.free()


async def test_a_waiter_cancelled_loses_nothing_and_a_slot_given_from_a_thread_wakes_it() -> None:
    slots = Slots(1)
    assert slots.try_take()
    gone = asyncio.ensure_future(slots.take())
    await asyncio.sleep(0)
    gone.cancel()
    kept = asyncio.ensure_future(slots.take())
    await asyncio.sleep(0)
    threading.Thread(target=slots.give).start()  # runners end on other loops' threads
    await asyncio.wait_for(kept, 5)
    assert slots.used == 1
    slots.give()
    assert slots.used == 0


async def test_a_lent_slot_comes_back_before_the_block_ends() -> None:
    slots = Slots(1)
    assert slots.try_take()
    async with slots.lent():
        assert slots.try_take()  # the child's
        child_done = asyncio.get_running_loop().call_later(0.01, slots.give)
    assert slots.used == 1
    child_done.cancel()
    slots.give()
    assert slots.used == 0
