"""Benchmark: `shardcheck mesh` for 8,192 ranks in JSON, and `check --verify` on the 256K example.

Prints whole-process wall and CPU seconds (user + sys of the child), minimum of N runs.
Usage: python bench/bench_mesh.py [--runs N]
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(cmd: list[str]) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), len(proc.stdout)


def report(name: str, cmd: list[str], runs: int) -> None:
    samples = [run(cmd) for _ in range(runs)]
    wall = min(s[0] for s in samples)
    cpu = min(s[1] for s in samples)
    print(f"{name:<48} wall {wall:6.3f} s   CPU {cpu:6.3f} s   output {samples[0][2]:>9} bytes")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    shard = [sys.executable, "-m", "shardcheck"]
    report(
        "mesh, 8192 ranks, JSON (TP8 PP8 CP2 EP16 ETP1)",
        shard
        + [
            "mesh",
            "--world",
            "8192",
            "--devices-per-node",
            "8",
            "--tp",
            "8",
            "--pp",
            "8",
            "--cp",
            "2",
            "--ep",
            "16",
            "--etp",
            "1",
            "--format",
            "json",
        ],
        args.runs,
    )
    report(
        "mesh, 8192 ranks, text summary",
        shard
        + [
            "mesh",
            "--world",
            "8192",
            "--devices-per-node",
            "8",
            "--tp",
            "8",
            "--pp",
            "8",
            "--cp",
            "2",
            "--ep",
            "16",
            "--etp",
            "1",
        ],
        args.runs,
    )
    if importlib.util.find_spec("torch") and importlib.util.find_spec("megatron"):
        case = str(ROOT / "tests/data/cases/qwen3_235b_256k_after.sh")
        report("check --verify, 256K example (256 ranks)", shard + ["check", case, "--verify"], args.runs)
    else:
        print("check --verify: torch / megatron-core not installed (pip install -e '.[verify]')")


if __name__ == "__main__":
    main()
