"""Seconds of ``shardcheck plan``: the whole process on the 256K example, and the search alone as the world
grows (the example's Qwen3-235B-A22B at 256K, 16 devices per node), with how many candidates each stage touched.

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


def whole_process(runs: int = 5) -> tuple[float, float]:
    """(wall, CPU) seconds of one ``shardcheck plan`` process, the fastest of ``runs`` (after one run that writes
    the bytecode caches, as an installed package has them): CPU (user + sys) is the figure that depends least on
    the machine's load."""
    import os
    import resource

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    command = [sys.executable, "-m", "shardcheck", "plan", str(EXAMPLE), "--device", "910c"]
    subprocess.run(command, check=False, capture_output=True, env=env)
    best = (float("inf"), float("inf"))
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(command, check=False, capture_output=True, env=env)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        best = min(best, (cpu, wall))
    return best[1], best[0]


def search(world: int) -> tuple[float, dict]:
    """The 256K example's own model, batch and sequence on ``world`` devices (NNODES = world / 16), searched
    without the proof (plan --model's minimal GRPO launch at batch 16 finds no rollout layout that fits
    the KV cache at 256K, so it would time an empty search)."""
    from shardcheck.plan import plan_script

    started = time.process_time()
    result = plan_script(EXAMPLE, {"NNODES": str(world // 16)}, device="910c", proof=False)
    return time.process_time() - started, result.counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", default="64,256,1024")
    parser.add_argument("--skip-cli", action="store_true")
    args = parser.parse_args()
    if not args.skip_cli:
        wall, cpu = whole_process()
        print(
            f"shardcheck plan {EXAMPLE.name} --device 910c (whole process, fastest of 5): {cpu:.2f} s CPU, "
            f"{wall:.2f} s wall"
        )
    for world in (int(w) for w in args.worlds.split(",")):
        seconds, counts = search(world)
        print(
            f"world {world:>6}: {seconds:6.2f} s CPU  layouts {counts['layouts']:>6}"
            f"  options {counts['memory_options']:>7}"
            f"  families opened {counts.get('families_opened', 0):>4}  shapes bounded {counts['bounded']:>6}"
            f"  refined {counts.get('refined', 0):>6}  timed {counts['timed']:>5}  judged {counts['judged']:>4}"
        )


if __name__ == "__main__":
    main()
