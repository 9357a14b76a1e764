"""Seconds of ``shardcheck plan``: the whole process on the 256K example, and the search alone as the world
grows (Qwen3-235B-A22B, 16 devices per node), with how many candidates each stage touched.

    python bench/bench_plan.py [--worlds 64,256,1024] [--skip-cli]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "src" / "shardcheck" / "examples" / "qwen3_235b_256k.sh"


def whole_process() -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "shardcheck", "plan", str(EXAMPLE), "--device", "910c"], check=False, capture_output=True
    )
    return time.perf_counter() - started


def search(world: int) -> tuple[float, dict]:
    from shardcheck.plan import plan_model

    started = time.perf_counter()
    result = plan_model(
        "Qwen3-235B-A22B", world=world, devices_per_node=16, device="910c", seq_len=262144, global_batch=16, proof=False
    )
    return time.perf_counter() - started, result.counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", default="64,256,1024")
    parser.add_argument("--skip-cli", action="store_true")
    args = parser.parse_args()
    if not args.skip_cli:
        print(f"shardcheck plan {EXAMPLE.name} --device 910c (whole process): {whole_process():.1f} s")
    for world in (int(w) for w in args.worlds.split(",")):
        seconds, counts = search(world)
        print(
            f"world {world:>6}: {seconds:6.1f} s  layouts {counts['layouts']:>6}  options {counts['memory_options']:>7}"
            f"  bounded {counts['bounded']:>7}  timed {counts['timed']:>5}  judged {counts['judged']:>4}"
        )


if __name__ == "__main__":
    main()
