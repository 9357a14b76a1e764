"""Time ``shardcheck check --format json`` over every .sh in a verl checkout's examples, in one process.

    python bench/bench_examples.py [VERL_CHECKOUT]

The checkout is argv[1], else $VERL_CHECKOUT.  Prints wall time and the child's CPU seconds
(user + system from resource.getrusage(RUSAGE_CHILDREN)), per script too.  $BENCH_REPEAT (default 3)
runs the same single call that many times and reports the best and the median.  A run whose stdout
is not the JSON report (shardcheck crashed part-way) is flagged and the script exits 1.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _shardcheck() -> list[str]:
    beside = Path(sys.executable).with_name("shardcheck")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("shardcheck")
    if found:
        return [found]
    return [sys.executable, "-m", "shardcheck.cli"]


def main(argv: list[str]) -> int:
    checkout = argv[1] if len(argv) > 1 else os.environ.get("VERL_CHECKOUT")
    if not checkout:
        print("usage: bench_examples.py VERL_CHECKOUT (or set $VERL_CHECKOUT)", file=sys.stderr)
        return 2
    examples = Path(checkout) / "examples"
    paths = sorted(str(p) for p in examples.rglob("*.sh") if p.is_file())
    if not paths:
        print(f"no .sh files under {examples}", file=sys.stderr)
        return 2

    cmd = _shardcheck() + ["check", "--format", "json", *paths]
    repeat = max(1, int(os.environ.get("BENCH_REPEAT", "3")))
    walls: list[float] = []
    cpus: list[tuple[float, float]] = []
    proc = None
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime))
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # Linux: KiB

    n = len(paths)
    reported = None
    try:
        reported = len(json.loads(proc.stdout)["results"])
        parsed = f"valid JSON, {reported} results"
    except (ValueError, KeyError, TypeError) as exc:
        parsed = f"NOT the JSON report ({type(exc).__name__}): shardcheck crashed part-way"

    total = [u + s for u, s in cpus]
    best = min(range(repeat), key=lambda k: total[k])
    print(f"scripts:          {n}  (one `shardcheck check --format json` call, {repeat} run(s))")
    print(
        f"exit code:        {proc.returncode}  (0 all valid, 1 some error finding, 2 some unusable input; "
        "a traceback also exits 1)"
    )
    print(f"stdout:           {len(proc.stdout)} bytes, {parsed}; stderr {len(proc.stderr)} bytes")
    print(
        f"wall time:        best {min(walls):.3f} s, median {statistics.median(walls):.3f} s  "
        f"({1000 * min(walls) / n:.1f} ms/script best)"
    )
    print(
        f"CPU user+sys:     best {total[best]:.3f} s (user {cpus[best][0]:.3f}, sys {cpus[best][1]:.3f}), "
        f"median {statistics.median(total):.3f} s  ({1000 * total[best] / n:.1f} ms/script best)"
    )
    print(f"peak RSS (child): {peak_mib:.1f} MiB")
    if proc.stderr.strip():
        print("stderr tail:")
        print("\n".join(proc.stderr.strip().splitlines()[-6:]))
    if reported is None:
        return 1
    return 0 if proc.returncode in (0, 1, 2) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
