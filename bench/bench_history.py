"""Per-turn cost of a conversation as its history grows: turnkit vs pydantic-ai and openai-agents.

Run: python bench/bench_history.py [--repeat N] [--sizes 50,200,800,3200] [--no-sessions]

Each framework starts from a history of N messages (user and assistant
text, about 90 characters each) and is then prompted 20 times, every turn
answered by its own scripted model (no network, no real model): turnkit's
``ScriptedModel``, pydantic-ai's ``FunctionModel`` (``message_history``
carried over), and a small ``agents.models.interface.Model`` subclass for
openai-agents (``to_input_list()`` carried over, tracing disabled). The
time is what each framework itself costs per turn, the scripted model's own
work included: a framework whose cost grows with the history it carries
re-does work on old messages every turn.

Agents and histories are built outside the timer. Each cell is the median
over N repeats of the mean per-turn time of the 20 turns. "growth" is a
framework's per-turn time at N over its time at the smallest N (turnkit's
target: at most 3x at 3,200 messages); "vs faster" is the faster peer's
time over turnkit's (higher is better for turnkit). A second table splits
turnkit's turns: the first one pays for its scripted model reading the
whole history once (the agent converted its configured history when it was
built); later turns convert only what is new.

A third table is a durable session (``App`` on a fresh SQLite file, the
same scripted model): a session whose stored conversation holds N messages
runs 20 turns, each ``send`` then ``wait``; the time is the whole turn,
database writes included, for the 19 turns after the first (the first
after a start reads and decodes the stored history once). A turn reads
only the messages stored since the last one and converts only what is
new, so its cost should not grow with N.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_agent import openai_agents_model

TURNS = 20
FILLER = "and a few more words so that a message is about as long as a short chat line"


def user_text(i: int) -> str:
    return f"Question {i}, {FILLER}?"


def reply_text(i: int) -> str:
    return f"Answer {i}, {FILLER}."


Case = Callable[[int], Callable[[], Awaitable[None]]]
"""Given N, builds one conversation (outside the timer) and returns its 20 timed turns."""


def turnkit_case(size: int, times: list[float] | None = None) -> Callable[[], Awaitable[None]]:
    """``times``, when given, gets the duration of each turn."""
    import turnkit
    from turnkit.testing import ScriptedModel

    history = []
    for i in range(size // 2):
        history += [turnkit.Message.user(user_text(i)), turnkit.Message.assistant(reply_text(i))]
    model = ScriptedModel([reply_text(i) for i in range(TURNS)])
    agent = turnkit.Agent(turnkit.AgentConfig("bench", model=model, history=history))

    async def turns() -> None:
        for i in range(TURNS):
            start = time.perf_counter()
            result = await agent.prompt(user_text(size + i))
            if times is not None:
                times.append(time.perf_counter() - start)
            assert result.success
        assert len(agent.get_history()) == size + 2 * TURNS

    return turns


async def turnkit_first_and_later(size: int, repeat: int) -> tuple[float, float]:
    """Median microseconds of turnkit's first turn (its scripted model meets
    the history for the first time) and of each later turn."""
    firsts, laters = [], []
    for _ in range(repeat):
        times: list[float] = []
        await turnkit_case(size, times)()
        firsts.append(times[0])
        laters.append(statistics.mean(times[1:]))
    return statistics.median(firsts) * 1e6, statistics.median(laters) * 1e6


async def session_turns_us(size: int, repeat: int) -> float:
    """Median over ``repeat`` sessions of the mean microseconds per session turn."""
    import json
    import tempfile

    import turnkit
    from turnkit.sessions import App
    from turnkit.sessions.db import schema as t
    from turnkit.testing import ScriptedModel

    means = []
    with tempfile.TemporaryDirectory() as folder:
        model = ScriptedModel([reply_text(i) for i in range((repeat + 1) * TURNS)])
        app = App(f"sqlite:///{folder}/bench.db", fire_schedules=False)
        app.agent("bench", model=model)(lambda: "Answer.")
        async with app:
            for run in range(repeat + 1):  # the first run warms up
                session = await app.create_session("bench")
                seed = [turnkit.Message.user(user_text(i // 2)) for i in range(0, size, 2)]
                seed = [
                    m
                    for i, u in enumerate(seed)
                    for m in (u, turnkit.Message.assistant(reply_text(i)))
                ]
                with app.runtime.store.write() as tx:  # as if stored by earlier turns
                    tx.execute(
                        t.messages.insert(),
                        [
                            {
                                "session_id": session.id,
                                "position": i + 1,
                                "turn_id": f"seed-{session.id}",
                                "turn_index": i,
                                "message": json.dumps(m.to_dict()),
                            }
                            for i, m in enumerate(seed)
                        ],
                    )
                    statement = t.sessions.update().where(t.sessions.c.id == session.id)
                    tx.execute(statement.values(message_seq=len(seed)))
                # The first turn after a start reads (and decodes) the stored history once.
                receipt = await app.send(session.id, text=user_text(size))
                await app.wait(receipt.turn_id, timeout=30)
                start = time.perf_counter()
                for i in range(1, TURNS):
                    receipt = await app.send(session.id, text=user_text(size + i))
                    turn = await app.wait(receipt.turn_id, timeout=30)
                    assert turn.status == "completed", turn.error
                if run:
                    means.append((time.perf_counter() - start) / (TURNS - 1))
            assert len(await app.history(session.id)) == size + 2 * TURNS
    return statistics.median(means) * 1e6


def pydantic_ai_case(size: int) -> Callable[[], Awaitable[None]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    replies = iter([reply_text(i) for i in range(TURNS)])

    def answer(messages: list[Any], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(next(replies))])

    agent = Agent(FunctionModel(answer))
    history: list[Any] = []
    for i in range(size // 2):
        history.append(ModelRequest(parts=[UserPromptPart(user_text(i))]))
        history.append(ModelResponse(parts=[TextPart(reply_text(i))]))

    async def turns() -> None:
        carried = history
        for i in range(TURNS):
            result = await agent.run(user_text(size + i), message_history=carried)
            carried = result.all_messages()
        assert len(carried) == size + 2 * TURNS

    return turns


def openai_agents_case(size: int) -> Callable[[], Awaitable[None]]:
    from agents import Agent, Runner, set_tracing_disabled

    set_tracing_disabled(True)  # its default exports traces over the network
    agent = Agent(name="bench", model=openai_agents_model())
    history: list[Any] = []
    for i in range(size // 2):
        history.append({"role": "user", "content": user_text(i)})
        history.append({"role": "assistant", "content": reply_text(i)})

    async def turns() -> None:
        carried = history
        for i in range(TURNS):
            new = {"role": "user", "content": user_text(size + i)}
            result = await Runner.run(agent, [*carried, new])
            carried = result.to_input_list()
        assert len(carried) == size + 2 * TURNS

    return turns


async def per_turn_us(case: Case, size: int, repeat: int) -> float:
    """Median over ``repeat`` conversations of the mean microseconds per turn."""
    await case(size)()  # warm up: imports, caches of the framework itself
    times = []
    for _ in range(repeat):
        turns = case(size)
        start = time.perf_counter()
        await turns()
        times.append((time.perf_counter() - start) / TURNS)
    return statistics.median(times) * 1e6


async def measure(sizes: list[int], repeat: int) -> dict[str, list[float]]:
    cases = {
        "turnkit": turnkit_case,
        "pydantic-ai": pydantic_ai_case,
        "openai-agents": openai_agents_case,
    }
    results: dict[str, list[float]] = {name: [] for name in cases}
    for size in sizes:
        for name, case in cases.items():
            # fewer repeats for long histories (each repeat is 20 turns of N messages),
            # but never under 9: a median of 3 is one noisy run on a shared machine
            runs = max(9, repeat * sizes[0] // size)
            results[name].append(await per_turn_us(case, size, runs))
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=60)
    parser.add_argument("--sizes", default="50,200,800,3200")
    parser.add_argument("--no-sessions", action="store_true", help="skip the session table")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    results = asyncio.run(measure(sizes, args.repeat))
    split = [asyncio.run(turnkit_first_and_later(size, 15)) for size in sizes]
    ours, pai, oai = results["turnkit"], results["pydantic-ai"], results["openai-agents"]
    print(
        f"{'history':>8}{'turnkit us':>12}{'growth':>8}{'pydantic-ai':>13}{'growth':>8}"
        f"{'openai-agents':>15}{'growth':>8}{'vs faster':>11}"
    )
    for index, size in enumerate(sizes):
        print(
            f"{size:>8}{ours[index]:>12.0f}{ours[index] / ours[0]:>7.1f}x"
            f"{pai[index]:>13.0f}{pai[index] / pai[0]:>7.1f}x"
            f"{oai[index]:>15.0f}{oai[index] / oai[0]:>7.1f}x"
            f"{min(pai[index], oai[index]) / ours[index]:>10.1f}x"
        )
    print()
    print(f"{'history':>8}{'turnkit first turn us':>23}{'each later turn us':>20}{'growth':>8}")
    for index, size in enumerate(sizes):
        first, later = split[index]
        print(f"{size:>8}{first:>23.0f}{later:>20.0f}{later / split[0][1]:>7.1f}x")
    if args.no_sessions:
        return
    sessions = [asyncio.run(session_turns_us(size, 5)) for size in sizes]
    print()
    print(f"{'history':>8}{'session turn us':>17}{'growth':>8}")
    for index, size in enumerate(sizes):
        print(f"{size:>8}{sessions[index]:>17.0f}{sessions[index] / sessions[0]:>7.1f}x")


if __name__ == "__main__":
    main()
