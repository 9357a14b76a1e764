"""Long fuzz run of the crash contract: arbitrary values for every key a rule reads, through every command.

The same inputs as tests/test_crash_contract.py, at volume and without hypothesis: each input is the
built-in verl example (or the FSDP launch, the Megatron-LM or the slime example) with 1-4 keys a rule
reads set to a random value (special numbers, huge and negative integers, floats, nan/inf, words,
lists, dicts, interpolations, unicode), run in-process through one of `check`, `check --format json`,
`memory`, `memory --format json`, `mesh`, `mesh --format json`. Prints inputs per command, internal
errors (exit 4) with their input, the slowest input and its time, and the peak memory of the process.

Usage: python bench/fuzz_values.py [--inputs N] [--seconds T] [--seed S] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import resource
import shlex
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_crash_contract import (
    COMMANDS,
    FSDP_BASE,
    MLM_EXAMPLE,
    SLIME_EXAMPLE,
    SPECIAL,
    VERL_EXAMPLE,
    _append_flags,
    flag_names,
    verl_keys,
)

from shardcheck.cli import main


def value(rng: random.Random) -> str:
    pick = rng.random()
    if pick < 0.4:
        return rng.choice(SPECIAL)
    if pick < 0.6:
        return str(rng.randint(-(10**6), 10**6))
    if pick < 0.7:
        return str(rng.randint(-(10**50), 10**50))
    if pick < 0.85:
        return repr(
            rng.choice([rng.uniform(-1e6, 1e6), rng.random(), rng.uniform(-2, 2) * 10 ** rng.randint(-300, 300)])
        )
    alphabet = 'abcxyz019_-.,:[]{}$ =é\\"'
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10)))


def make_input(rng: random.Random, keys, mlm_flags, slime_flags) -> str:
    base = rng.choice(["megatron", "fsdp", "megatron-lm", "slime"])
    n = rng.randint(1, 4)
    if base in ("megatron", "fsdp"):
        pairs = [(rng.choice(keys), value(rng)) for _ in range(n)]
        words = " ".join(
            shlex.quote(f"{'++' if '.override_transformer_config.' in k else ''}{k}={v}") for k, v in pairs
        )
        body = VERL_EXAMPLE.read_text() if base == "megatron" else FSDP_BASE
        return f"set -- {words}\n{body}"
    flags = mlm_flags if base == "megatron-lm" else slime_flags
    words = " ".join(f"{rng.choice(flags)} {shlex.quote(value(rng))}" for _ in range(n))
    return _append_flags((MLM_EXAMPLE if base == "megatron-lm" else SLIME_EXAMPLE).read_text(), words)


def main_loop() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seconds", type=float, default=None, help="stop after this long (the inputs run are reported)")
    ap.add_argument("--out", type=Path, help="where to keep the inputs that failed (default: a temporary folder)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    keys, mlm, slime = verl_keys(), flag_names("megatron-lm"), flag_names("slime")
    out_dir = args.out or Path(tempfile.mkdtemp(prefix="shardcheck-fuzz-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    script = out_dir / "input.sh"
    per_command: Counter = Counter()
    codes: Counter = Counter()
    failures: list[tuple[str, str, str]] = []
    slowest = (0.0, "", "")
    start = time.perf_counter()
    done = 0
    for i in range(args.inputs):
        if args.seconds is not None and time.perf_counter() - start > args.seconds:
            break
        done += 1
        text = make_input(rng, keys, mlm, slime)
        script.write_text(text)
        command = rng.choice(COMMANDS)
        sink = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            try:
                code = main([command[0], str(script), *command[1:]])
            except BaseException as exc:  # noqa: BLE001 — anything escaping main is a failure
                code = f"raised {type(exc).__name__}"
        took = time.perf_counter() - t0
        per_command[" ".join(command[:3])] += 1
        codes[code] += 1
        if took > slowest[0]:
            slowest = (took, " ".join(command), text)
        output = sink.getvalue()
        if code not in (0, 1, 2) or "Traceback" in output:
            kept = out_dir / f"failure-{len(failures)}.sh"
            kept.write_text(text)
            failures.append(
                (" ".join(command), str(kept), output.strip().splitlines()[-1][:300] if output else str(code))
            )
        if (i + 1) % 1000 == 0:
            print(f"  {i + 1} inputs, {len(failures)} failures, {time.perf_counter() - start:.0f} s", flush=True)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"inputs: {done} in {wall:.0f} s ({wall / max(done, 1) * 1000:.0f} ms each), seed {args.seed}")
    for command, n in sorted(per_command.items()):
        print(f"  {command:32} {n}")
    print(f"exit codes: {dict(sorted(codes.items(), key=str))}")
    print(f"failures (exit not 0/1/2, or a traceback): {len(failures)}")
    for command, path, line in failures[:20]:
        print(f"  {command}: {path}: {line}")
    print(f"slowest input: {slowest[0]:.2f} s ({slowest[1]})")
    print(f"peak memory of the process: {peak:.0f} MiB")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main_loop())
