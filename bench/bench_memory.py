"""Benchmark: `shardcheck memory` on the 256K example (whole process), and the estimate alone (in process).

Prints the minimum wall seconds of N runs, and the whole process's CPU seconds (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)``): on a shared machine the wall figure includes waiting for a core,
the CPU figure does not. Usage: python bench/bench_memory.py [--runs N]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "tests" / "data" / "cases" / "qwen3_235b_256k_after.sh"


def best(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    cmd = [sys.executable, "-m", "shardcheck", "memory", str(CASE), "--device", "h200", "--format", "json"]
    cpu: list[float] = []

    def run() -> None:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(cmd, stdout=subprocess.DEVNULL, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)

    wall = best(run, args.runs)
    print(f"{'shardcheck memory (256K example, JSON), process':<52} wall {wall:6.3f} s  cpu {min(cpu):6.3f} s")

    from shardcheck.api import resolve_script
    from shardcheck.memory.estimate import estimate

    job = resolve_script(CASE)
    per = best(lambda: estimate(job, "h200"), args.runs * 20)
    print(f"{'estimate() alone (16 stages, 94 layers)':<52} wall {per * 1000:6.2f} ms")


if __name__ == "__main__":
    main()
