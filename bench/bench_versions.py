"""Benchmark: `shardcheck check --versions` (the version matrix) and plain `check` with version inference.

Prints CPU seconds (user + sys of the child process, median of N runs) of the whole process for
  1. `python -c pass`                                   (the interpreter floor)
  2. `shardcheck check <256K case>`                     (inferred verl version, every accepted version compared)
  3. `shardcheck check --verl-version 0.9.1 <256K case>` (no inference)
  4. `shardcheck check --versions <256K case>`           (11 verl versions + 11 megatron-core minors)

Usage: python bench/bench_versions.py [--runs N] [--script PATH]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "tests" / "data" / "cases" / "qwen3_235b_256k_after.sh"


def child_cpu(cmd: list[str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {k: v for k, v in os.environ.items() if k != "SHARDCHECK_VERL_VERSION"}
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--script", type=Path, default=CASE)
    args = parser.parse_args()
    shard = [sys.executable, "-m", "shardcheck", "check"]
    rows = [
        ("python -c pass", [sys.executable, "-c", "pass"]),
        ("check (inferred version)", [*shard, str(args.script)]),
        ("check --verl-version 0.9.1", [*shard, "--verl-version", "0.9.1", str(args.script)]),
        ("check --versions", [*shard, "--versions", str(args.script)]),
    ]
    for name, cmd in rows:
        times = [child_cpu(cmd) for _ in range(args.runs)]
        print(f"{name:<30} {statistics.median(times):6.3f} s CPU (median of {args.runs})")


if __name__ == "__main__":
    main()
