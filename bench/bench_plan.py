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


def whole_process() -> tuple[float, float]:
    """(wall, CPU) seconds of one ``shardcheck plan`` process: CPU (user + sys) is the figure that does not
    depend on the machine's load."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "shardcheck", "plan", str(EXAMPLE), "--device", "910c"], check=False, capture_output=True
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


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
        print(f"shardcheck plan {EXAMPLE.name} --device 910c (whole process): {cpu:.2f} s CPU, {wall:.2f} s wall")
    for world in (int(w) for w in args.worlds.split(",")):
        seconds, counts = search(world)
        print(
            f"world {world:>6}: {seconds:6.2f} s CPU  layouts {counts['layouts']:>6}"
            f"  options {counts['memory_options']:>7}"
            f"  bounded {counts['bounded']:>7}  timed {counts['timed']:>5}  judged {counts['judged']:>4}"
        )


if __name__ == "__main__":
    main()
