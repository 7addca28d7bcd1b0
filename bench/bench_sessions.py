"""Durable session turns: turnkit vs pydantic-ai's DBOS agent vs a bare DBOS workflow.

Run: python bench/bench_sessions.py [--sessions 20] [--turns 10]

Each contender runs SESSIONS conversations at once, TURNS turns each, one
after the other within a conversation (send, wait for the end, send the
next), with a scripted model (no network): once answering with text, once
making one tool call and then answering. All three run DBOS 3.4 on a fresh
SQLite file with the same settings (WAL, synchronous=NORMAL, the queue
polled every 20 ms), each in its own process (DBOS is one per process):

- turnkit: ``App.send`` then ``App.wait``; started/completed times are the
  ``turn.started`` / ``turn.completed`` events' timestamps.
- pydantic-ai: ``pydantic_ai.durable_exec.dbos.DBOSAgent`` around an Agent
  on a ``FunctionModel``, ``run(prompt, message_history=...)`` (the peer);
  "started" is its first model call.
- floor: a bare DBOS workflow with the same number of steps (1 without a
  tool; model, tool, model with one), enqueued on a queue partitioned by
  session; "started" is its first step.

Printed: turns per second, p50/p95 of send -> started and send -> completed,
and turnkit's throughput as a ratio of the peer's and of the floor's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

POLL = 0.02


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def drive(sessions: int, turns: int, one_turn: Any) -> dict[str, Any]:
    """Run ``one_turn(session, i) -> (sent, started, completed)`` for every session at once."""
    samples: list[tuple[float, float, float]] = []

    async def conversation(session: int) -> None:
        for i in range(turns):
            samples.append(await one_turn(session, i))

    begin = time.time()
    await asyncio.gather(*(conversation(s) for s in range(sessions)))
    elapsed = time.time() - begin
    return {
        "turns_per_s": len(samples) / elapsed,
        "started_ms": [1000 * (s - t) for t, s, _ in samples],
        "completed_ms": [1000 * (c - t) for t, _, c in samples],
    }


async def launch_dbos(name: str, db: str) -> None:
    """DBOS on ``db`` with the engine turnkit uses (WAL, synchronous=NORMAL)."""
    from dbos import DBOS

    from turnkit.sessions.db.engines import Databases as Engines

    engines = Engines(f"sqlite:///{db}")
    config = {
        "name": name,
        "system_database_url": engines.url,
        "system_database_engine": engines.dbos,
        "log_level": "WARNING",
    }
    DBOS(config=config)  # type: ignore[arg-type]
    await asyncio.to_thread(DBOS.launch)


# -- turnkit -----------------------------------------------------------------


async def run_turnkit(db: str, sessions: int, turns: int, tool: bool) -> dict[str, Any]:
    import turnkit
    from turnkit.sessions import App
    from turnkit.testing import ScriptedModel

    app = App(f"sqlite:///{db}", polling_interval=POLL)

    @turnkit.tool
    def lookup(order: str) -> str:
        """Look up an order."""
        return f"order {order}: shipped"

    def reply(request: Any) -> Any:
        last = request.messages[-1].content[0]
        if tool and getattr(last, "type", "") != "tool_result":
            call = {"type": "tool_use", "id": f"c{time.perf_counter_ns()}", "name": "lookup"}
            return {"role": "assistant", "content": [{**call, "input": {"order": "7"}}]}
        return "done"

    @app.agent("bench", model=ScriptedModel([reply] * 10**6), tools=[lookup])
    def bench() -> str:
        return "Answer briefly."

    async with app:
        ids = [(await app.create_session("bench")).id for _ in range(sessions)]

        async def one_turn(session: int, i: int) -> tuple[float, float, float]:
            sent = time.time()
            receipt = await app.send(ids[session], text=f"turn {i}")
            turn = await app.wait(receipt.turn_id, timeout=60)
            assert turn.status == "completed", turn.error
            return sent, turn.started_at.timestamp(), turn.ended_at.timestamp()

        await one_turn(0, -1)  # warm-up: the first model call resolves lazily
        return await drive(sessions, turns, one_turn)


# -- pydantic-ai's DBOS agent (the peer) -------------------------------------


async def run_peer(db: str, sessions: int, turns: int, tool: bool) -> dict[str, Any]:
    from dbos import DBOS
    from pydantic_ai import Agent
    from pydantic_ai.durable_exec.dbos import DBOSAgent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    # DBOSAgent is deprecated in favour of the DBOSDurability capability; it is
    # still the documented one-line way to make an agent durable, as measured here.
    warnings.simplefilter("ignore", DeprecationWarning)

    first_call: dict[str, float] = {}

    def reply(messages: list[Any], info: AgentInfo) -> ModelResponse:
        prompts = [p.content for m in messages for p in m.parts if p.part_kind == "user-prompt"]
        first_call.setdefault(prompts[-1], time.time())
        last = messages[-1].parts[-1]
        if tool and not isinstance(last, ToolReturnPart):
            return ModelResponse(parts=[ToolCallPart("lookup", {"order": "7"})])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(reply), name="bench")

    @agent.tool_plain
    def lookup(order: str) -> str:
        """Look up an order."""
        return f"order {order}: shipped"

    durable = DBOSAgent(agent)
    await launch_dbos("peer", db)
    histories: dict[int, list[Any]] = {s: [] for s in range(sessions)}

    async def one_turn(session: int, i: int) -> tuple[float, float, float]:
        sent, prompt = time.time(), f"session {session} turn {i}"
        result = await durable.run(prompt, message_history=histories.get(session, []))
        done = time.time()
        histories[session] = result.all_messages()
        return sent, first_call[prompt], done

    try:
        await one_turn(0, -1)
        histories[0] = []
        return await drive(sessions, turns, one_turn)
    finally:
        DBOS.destroy()


# -- the floor: a bare DBOS workflow with the same steps ---------------------


async def run_floor(db: str, sessions: int, turns: int, tool: bool) -> dict[str, Any]:
    from dbos import DBOS, SetEnqueueOptions

    started: dict[str, float] = {}

    @DBOS.step()
    async def model_step(text: str) -> str:
        started.setdefault(DBOS.workflow_id or "", time.time())
        return f"reply to {text}"

    @DBOS.step()
    async def tool_step(order: str) -> str:
        return f"order {order}: shipped"

    @DBOS.workflow()
    async def turn(text: str) -> str:
        reply = await model_step(text)
        if tool:
            await tool_step("7")
            reply = await model_step(reply)
        return reply

    await launch_dbos("floor", db)
    await DBOS.register_queue_async("floor", partition_concurrency=1, polling_interval_sec=POLL)

    async def one_turn(session: int, i: int) -> tuple[float, float, float]:
        sent = time.time()
        with SetEnqueueOptions(queue_partition_key=f"s{session}"):
            handle = await DBOS.enqueue_workflow_async("floor", turn, f"turn {i}")
        await handle.get_result(polling_interval_sec=0.005)
        return sent, started[handle.get_workflow_id()], time.time()

    try:
        await one_turn(0, -1)
        return await drive(sessions, turns, one_turn)
    finally:
        DBOS.destroy()


RUNNERS = {"turnkit": run_turnkit, "pydantic-ai DBOS": run_peer, "bare DBOS": run_floor}


def child(name: str, sessions: int, turns: int, tool: bool) -> dict[str, Any]:
    """Run one contender in a fresh interpreter (DBOS is one per process)."""
    with tempfile.TemporaryDirectory() as folder:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                name,
                "--sessions",
                str(sessions),
                "--turns",
                str(turns),
                "--db",
                str(Path(folder) / "bench.db"),
            ]
            + (["--tool"] if tool else []),
            capture_output=True,
            text=True,
            check=False,
        )
    if out.returncode != 0:
        raise SystemExit(f"{name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--child")
    parser.add_argument("--db")
    parser.add_argument("--tool", action="store_true")
    args = parser.parse_args()
    if args.child:
        result = asyncio.run(RUNNERS[args.child](args.db, args.sessions, args.turns, args.tool))
        print(json.dumps(result))
        return
    for sessions, turns in ((args.sessions, args.turns), (1, 2 * args.turns)):
        table(sessions, turns)


def table(sessions: int, turns: int) -> None:
    print(f"{sessions * turns} turns over {sessions} session(s), {turns} each, SQLite (WAL)\n")
    header = f"{'':<8}{'contender':<18}{'turns/s':>9}{'started p50':>13}{'p95':>8}"
    print(header + f"{'completed p50':>15}{'p95':>8}")
    for tool in (False, True):
        label = "1 tool" if tool else "no tool"
        rows = {name: child(name, sessions, turns, tool) for name in RUNNERS}
        for name, row in rows.items():
            started, completed = row["started_ms"], row["completed_ms"]
            print(
                f"{label:<8}{name:<18}{row['turns_per_s']:>9.1f}"
                f"{statistics.median(started):>11.1f}ms{pct(started, 0.95):>6.1f}ms"
                f"{statistics.median(completed):>13.1f}ms{pct(completed, 0.95):>6.1f}ms"
            )
        ours = rows["turnkit"]["turns_per_s"]
        peer, floor = rows["pydantic-ai DBOS"]["turns_per_s"], rows["bare DBOS"]["turns_per_s"]
        print(f"{'':<8}turnkit / peer: {ours / peer:.2f}x   turnkit / floor: {ours / floor:.2f}x\n")


if __name__ == "__main__":
    main()
