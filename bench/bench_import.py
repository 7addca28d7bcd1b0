"""Cold ``import turnkit`` time, beside the agent frameworks it is compared with.

Run: python bench/bench_import.py [--runs N]

Each import runs in a fresh interpreter (``python -c "import X"``), N times,
interleaved with ``python -c pass``; the table shows the median of each
minus the median of ``pass`` (the interpreter's own start-up), and the ratio
to turnkit (> 1 means the peer is slower to import). The target for
turnkit is under 150 ms on the 2-core development machine.
"""

from __future__ import annotations

import argparse
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


def run_once(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - start


def measure(runs: int) -> dict[str, float]:
    """Median milliseconds of each import, less the interpreter's start-up."""
    samples: dict[str, list[float]] = {name: [] for name in ["pass", *PEERS]}
    codes = {"pass": "pass", **PEERS}
    for code in codes.values():
        run_once(code)  # warm the file system cache and the bytecode
    for _ in range(runs):
        for name, code in codes.items():  # interleaved: load changes hit all alike
            samples[name].append(run_once(code))
    base = statistics.median(samples["pass"])
    return {name: (statistics.median(samples[name]) - base) * 1000 for name in PEERS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    times = measure(args.runs)
    ours = times["turnkit"]
    print(f"cold import, median of {args.runs} runs, interpreter start-up subtracted\n")
    print(f"{'package':<16}{'ms':>8}{'x turnkit':>11}")
    for name, ms in times.items():
        print(f"{name:<16}{ms:>8.1f}{ms / ours:>11.2f}")
    verdict = "within" if ours < TARGET_MS else "OVER"
    print(f"\nturnkit: {ours:.1f} ms, {verdict} the {TARGET_MS:.0f} ms target")


if __name__ == "__main__":
    main()
