"""Cold ``import turnkit`` time, beside the agent frameworks it is compared with.

Run: python bench/bench_import.py [--runs N]

Each import runs in a fresh interpreter (``python -c "import X"``), N times,
interleaved with ``python -c pass``; the table shows the median of each
minus the median of ``pass`` (the interpreter's own start-up), and the ratio
to turnkit (> 1 means the peer is slower to import). Two clocks: wall time
(what a user waits) and the child's CPU time (user + system), which other
work on a busy machine inflates much less. The target for turnkit is under
150 ms on the 2-core development machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

PEERS = {
    "turnkit": "import turnkit",
    "pydantic-ai": "import pydantic_ai",
    "openai-agents": "import agents",
}
TARGET_MS = 150.0


def run_once(code: str) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh interpreter running ``code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def measure(runs: int) -> dict[str, tuple[float, float]]:
    """Median wall and CPU milliseconds of each import, less the interpreter's start-up."""
    codes = {"pass": "pass", **PEERS}
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in codes}
    for code in codes.values():
        run_once(code)  # warm the file system cache and the bytecode
    for _ in range(runs):
        for name, code in codes.items():  # interleaved: load changes hit all alike
            samples[name].append(run_once(code))

    def median(name: str, clock: int) -> float:
        return statistics.median(sample[clock] for sample in samples[name])

    return {
        name: tuple((median(name, c) - median("pass", c)) * 1000 for c in (0, 1))  # type: ignore[misc]
        for name in PEERS
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    times = measure(args.runs)
    wall, cpu = times["turnkit"]
    print(f"cold import, median of {args.runs} runs, interpreter start-up subtracted")
    print(f"(load average at the end: {os.getloadavg()[0]:.1f})\n")
    print(f"{'package':<16}{'wall ms':>9}{'x turnkit':>11}{'cpu ms':>9}{'x turnkit':>11}")
    for name, (w, c) in times.items():
        print(f"{name:<16}{w:>9.1f}{w / wall:>11.2f}{c:>9.1f}{c / cpu:>11.2f}")
    verdict = "within" if wall < TARGET_MS else "OVER"
    target = f"{verdict} the {TARGET_MS:.0f} ms target"
    print(f"\nturnkit: {wall:.1f} ms wall ({target}), {cpu:.1f} ms CPU")


if __name__ == "__main__":
    main()
