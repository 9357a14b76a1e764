"""Benchmark: `shardcheck diff --git A..B` over a repository where 100 launch scripts changed.

Builds a temporary git repository of N launch scripts (the 256K case at its before layout, each a little
different), commits, changes every script's layout to the after one (TP 4→2, PP 8→16, EP 32→16, first /
last stage 11→5), commits, and times the whole command (a child process: start-up, git, both sides' checks,
mesh, memory, rendering), median of the runs. Target (issue 15): ≤ 5 s for 100 scripts.

Also prints the CPU seconds of all its processes (wall on a shared machine says little).

Usage: python bench/bench_diff.py [--scripts N] [--runs R] [--format json|text|markdown|sarif] [--jobs J]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "data" / "cases"
ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "b",
    "GIT_AUTHOR_EMAIL": "b@example.invalid",
    "GIT_COMMITTER_NAME": "b",
    "GIT_COMMITTER_EMAIL": "b@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=ENV).stdout


def build(repo: Path, n: int) -> tuple[str, str]:
    before, after = (CASES / "qwen3_235b_256k_before.sh").read_text(), (CASES / "qwen3_235b_256k_after.sh").read_text()
    git(repo, "init", "-q", "-b", "main")
    for k in range(n):
        d = repo / "jobs" / f"team{k % 10}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"run_{k:03d}.sh").write_text(before.replace("train_prompt_bsz=4", f"train_prompt_bsz=4  # job {k}"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "before")
    first = git(repo, "rev-parse", "HEAD").strip()
    for k in range(n):
        p = repo / "jobs" / f"team{k % 10}" / f"run_{k:03d}.sh"
        p.write_text(after.replace("train_prompt_bsz=4", f"train_prompt_bsz=4  # job {k}"))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "after")
    return first, git(repo, "rev-parse", "HEAD").strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scripts", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--format", default="json")
    ap.add_argument("--jobs", type=int, default=None, help="passed to diff --jobs (default: its own)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        repo.mkdir()
        a, b = build(repo, args.scripts)
        cmd = [sys.executable, "-m", "shardcheck", "diff", "--git", f"{a}..{b}", "--format", args.format]
        if args.jobs is not None:
            cmd += ["--jobs", str(args.jobs)]
        walls, cpus = [], []
        for _ in range(args.runs):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, check=False)
            walls.append(time.perf_counter() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the command and its worker processes
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if done.returncode not in (0, 1):
                sys.exit(f"shardcheck diff failed ({done.returncode}): {done.stderr[-500:]}")
        count = len(json.loads(done.stdout)["diffs"]) if args.format == "json" else args.scripts
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        cores = os.cpu_count() or 1
        print(
            f"shardcheck diff --git A..B over {args.scripts} changed launch scripts ({count} diffs, "
            f"{2 * args.scripts} checks), --format {args.format}, {cores} CPUs, load average "
            f"{os.getloadavg()[0]:.1f} at the end:"
        )
        print(f"  wall {wall:.2f} s (median of {args.runs}; min {min(walls):.2f}), target ≤ 5 s")
        print(
            f"  CPU {cpu:.2f} s in all processes = {1000 * cpu / (2 * args.scripts):.0f} ms per check; on an idle "
            f"machine that is ≈ {cpu / min(cores, 8):.1f} s wall over {min(cores, 8)} workers, "
            f"≈ {cpu / 8:.1f} s over 8"
        )


if __name__ == "__main__":
    main()
