"""Time ``shardcheck check --format json`` over every .sh in a verl checkout's examples, in one process.

    python bench/bench_examples.py [VERL_CHECKOUT]

The checkout is argv[1], else $VERL_CHECKOUT.  Prints wall time and the child's CPU seconds
(user + system from resource.getrusage(RUSAGE_CHILDREN)), per script too.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
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
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user = after.ru_utime - before.ru_utime
    system = after.ru_stime - before.ru_stime
    peak_mib = after.ru_maxrss / 1024  # Linux: KiB

    parsed = "unparsed"
    try:
        json.loads(proc.stdout)
        parsed = "valid JSON"
    except ValueError as exc:
        parsed = f"invalid JSON ({exc})"

    n = len(paths)
    print(f"scripts:          {n}")
    print(f"exit code:        {proc.returncode}  (0 all valid, 1 some error finding, 2 some unusable input)")
    print(f"stdout:           {len(proc.stdout)} bytes, {parsed}; stderr {len(proc.stderr)} bytes")
    print(f"wall time:        {wall:.3f} s  ({1000 * wall / n:.1f} ms/script)")
    print(f"CPU user+sys:     {user + system:.3f} s  (user {user:.3f}, sys {system:.3f}; "
          f"{1000 * (user + system) / n:.1f} ms/script)")
    print(f"peak RSS (child): {peak_mib:.1f} MiB")
    if proc.stderr.strip():
        print("stderr tail:")
        print("\n".join(proc.stderr.strip().splitlines()[-10:]))
    return 0 if proc.returncode in (0, 1, 2) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
