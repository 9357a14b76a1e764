"""Long fuzzing runs: mutated scripts through shardcheck's commands, in-process, each under a time and memory budget.

Each input is a seed script of the repository (tests/data/cases, examples/, the built-in example, small
launches of each framework) with 1-6 mutations (bytes, lines, splices of other seeds and of hostile lines,
numbers, quotes, unicode; tests/fuzzing.py), given to one command: the bash reader alone, `check`,
`memory`, `mesh` (and `plan` where it exists). Input k is drawn from random.Random(f"{seed}:{k}"), so a
run is the same for any number of jobs, and any failing input can be re-made alone (--only K).

Prints inputs per command, failures (an exception, more than --time-limit seconds, more than --memory-limit),
the slowest input and its time, and the peak memory (ru_maxrss) of the worker processes; failing inputs are
written to --failures DIR.

Usage: nice python bench/fuzz.py --inputs 100000 --seed 17 --jobs 2 [--failures /tmp/fuzz-failures]
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import random
import resource
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import fuzzing

WEIGHTS = {"reader": 6, "check": 2, "memory": 1, "mesh": 1, "plan": 1}


def make_input(seed: str, k: int, seeds: list[fuzzing.Seed], commands: tuple[str, ...]):
    rng = random.Random(f"{seed}:{k}")
    base = seeds[rng.randrange(len(seeds))]
    ops = [
        (rng.choice(fuzzing.KINDS), rng.randrange(1 << 16), rng.randrange(1 << 16)) for _ in range(rng.randint(1, 6))
    ]
    command = rng.choices(commands, weights=[WEIGHTS.get(c, 1) for c in commands])[0]
    return base, ops, command, fuzzing.mutate(base.text, ops, [s.text for s in seeds])


def _worker(job: tuple[int, int, argparse.Namespace]) -> dict:
    from shardcheck.guard import run_guarded

    index, jobs, args = job
    seeds = fuzzing.seeds()
    commands = tuple(args.commands.split(",")) if args.commands else fuzzing.commands()
    work = Path(tempfile.mkdtemp(prefix="shardcheck-fuzz-"))
    for folder in ("examples", "tests/data/cases"):  # sourced files stay where the seeds expect them
        shutil.copytree(ROOT / folder, work / folder)
    stats = {"inputs": {}, "failures": [], "slowest": [], "fail_dir": args.failures, "per_command": {}}
    ks = [args.only] if args.only is not None else range(index, args.inputs, jobs)
    for n, k in enumerate(ks):
        base, ops, command, data = make_input(args.seed, k, seeds, commands)
        folder = work / Path(base.name).parent if (work / Path(base.name).parent).is_dir() else work
        path = folder / f"fuzz-{k}.sh"
        path.write_bytes(data)
        start = time.perf_counter()
        error = None
        try:
            _, why = run_guarded(
                functools.partial(fuzzing.run_command, command, path, data),
                seconds=args.time_limit,
                memory=args.memory_limit,
            )
            if why is not None:
                error = why
        except Exception:  # noqa: BLE001 - the contract broken: a traceback
            error = "".join(traceback.format_exc().splitlines(keepends=True)[-4:])
        elapsed = time.perf_counter() - start
        path.unlink()
        stats["inputs"][command] = stats["inputs"].get(command, 0) + 1
        stats["slowest"] = sorted(
            stats["slowest"] + [(elapsed, f"input {k} ({command}, seed {base.name}, ops {ops})")], reverse=True
        )[:5]
        total, worst = stats["per_command"].get(command, (0.0, 0.0))
        stats["per_command"][command] = (total + elapsed, max(worst, elapsed))
        if error is not None:
            stats["failures"].append({"k": k, "command": command, "seed": base.name, "ops": ops, "error": error})
            if args.failures:
                out = Path(args.failures)
                out.mkdir(parents=True, exist_ok=True)
                (out / f"input-{k}-{command}.sh").write_bytes(data)
        if index == 0 and args.progress and n % 500 == 0:
            print(f"  worker 0: {n} inputs, {len(stats['failures'])} failures", file=sys.stderr, flush=True)
    shutil.rmtree(work, ignore_errors=True)
    stats["maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("--seed", default="17")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument(
        "--commands", default="", help="comma-separated (default: all: reader,check,memory,mesh[,plan])"
    )
    parser.add_argument(
        "--weights",
        default="",
        help="e.g. reader=16,check=2,memory=1,mesh=1 (default: "
        + ",".join(f"{k}={v}" for k, v in WEIGHTS.items())
        + ")",
    )
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--memory-limit", type=int, default=1 << 30)
    parser.add_argument("--failures", default="", help="write failing inputs here")
    parser.add_argument("--only", type=int, default=None, help="run input K alone")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args()
    for item in filter(None, args.weights.split(",")):
        name, _, weight = item.partition("=")
        WEIGHTS[name] = int(weight)
    start = time.time()
    jobs = 1 if args.only is not None else args.jobs
    if jobs == 1:
        results = [_worker((0, 1, args))]
    else:
        with multiprocessing.get_context("fork").Pool(jobs, maxtasksperchild=1) as pool:
            results = pool.map(_worker, [(i, jobs, args) for i in range(jobs)])
    inputs: dict[str, int] = {}
    failures = []
    for r in results:
        for c, n in r["inputs"].items():
            inputs[c] = inputs.get(c, 0) + n
        failures += r["failures"]
    slowest = sorted((s for r in results for s in r["slowest"]), reverse=True)[:5]
    per_command: dict[str, tuple[float, float]] = {}
    for r in results:
        for c, (total, worst) in r["per_command"].items():
            t0, w0 = per_command.get(c, (0.0, 0.0))
            per_command[c] = (t0 + total, max(w0, worst))
    print(
        f"shardcheck fuzz: seed {args.seed}, {sum(inputs.values())} inputs in {time.time() - start:.0f} s "
        f"({jobs} jobs; limits {args.time_limit:g} s, {args.memory_limit >> 20} MiB per input)"
    )
    for c in sorted(inputs):
        total, worst = per_command[c]
        print(f"  {c:<7} {inputs[c]:>7} inputs, mean {total / inputs[c] * 1000:.0f} ms, slowest {worst:.2f} s")
    print(f"  failures: {len(failures)}")
    for f in failures[:30]:
        print(f"    input {f['k']} ({f['command']}, {f['seed']}): {f['error'].strip().splitlines()[-1][:200]}")
    for elapsed, what in slowest:
        print(f"  slow: {elapsed:.2f} s, {what}")
    print(f"  peak memory (ru_maxrss of a worker): {max(r['maxrss_kib'] for r in results) / 1024:.0f} MiB")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
