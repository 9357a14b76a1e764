"""The crash contract through the command line, at scale: generated inputs given to every command
(check, memory, mesh, plan, diff, report, explain, rules) by calling ``shardcheck.cli.main(argv)`` in-process,
beside the bash reader alone (cheap, most inputs).

Each input: a seed script of the repository mutated (tests/fuzzing.py), sometimes with a hostile side file
next to it (a pyproject.toml [tool.shardcheck] table, a model config.json, a verl YAML config named by
``--config-path``) and a hostile option value (sizes, limits, -o targets, versions, rule ids). Input k is drawn
from random.Random(f"{seed}:{k}"), so any failing input is re-made alone with --only K.

A failure: an exception out of ``main``, exit status 4 (an internal error), a traceback printed, JSON mode
printing no JSON document, or an input running past its own --time-limit by more than 2 s of CPU time.
Results (counts, failure classes by exception type and site, the failing inputs) go to --out.

Usage: nice -n 19 python bench/fuzz_cli.py --inputs 100000 --seed 34 --out /work/notes/fuzz100k
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import fuzzing

WEIGHTS = {  # sized for 100,000 inputs in about 50 minutes of one core (about 30 ms an input)
    "reader": 160,
    "check": 16,
    "memory": 6,
    "mesh": 6,
    "plan": 1,
    "diff": 3,
    "report": 2,
    "explain": 3,
    "rules": 1,
    "options": 2,
}
HOSTILE_OPTIONS = [
    ("--memory-limit", ["1e20TiB", "0", "-1", "nan", "1e400", "1b", "3GiB"]),
    ("--device-memory", ["1e400GiB", "0", "-5GiB", "nan", "1kb", "96GiB"]),
    ("--host-memory", ["1e400", "0", "inf", "2TiB", "-1"]),
    ("--time-limit", ["0.000001", "0", "-1", "nan", "1e9", "0.5"]),
    ("--device", ["h200", "nope", "", "x" * 300, "memory:1"]),
    ("--verl-version", ["0.9.1", "9.9.9", "", "main", "0.4", "v0.5.0"]),
    ("--megatron-core-version", ["0.16", "99", "x"]),
    ("--sample-tokens", ["3000", "3000,1", "0", "1,2,3", "9" * 50]),
    ("--env", ["A=1", "=", "X", "A=\n", "1A=2"]),
    ("--select", ["MCORE-", "", ",", "NOPE"]),
    ("--fail-on", ["info", "warning"]),
]
EXPLAIN_IDS = ["VERL-ACT-MBS", "MCORE-", "", "x" * 500, "INTERNAL-ERROR", "verl-act-mbs", "\x1b[31m", "../etc"]
PYPROJECTS = [
    "[tool.shardcheck]\nx = " + "[" * 1000 + "]" * 1000,
    "[tool.shardcheck]\nselect = [" + "9" * 5000 + "]",
    '[tool.shardcheck]\nverl-path = "a\\u0000b"',
    "[tool.shardcheck]\nignore = [" + ",".join(f'"X-{i}"' for i in range(3000)) + "]",
    "[tool.shardcheck]\nfail-on = 3",
    '[tool.shardcheck]\nper-file-ignores = {"*" = "MCORE-"}',
    "[tool.shardcheck\n",
    '[tool]\nshardcheck = "x"',
]
MODEL_CONFIGS = [
    {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 8, "rope_scaling": []},
    {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 8, "text_config": []},
    {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 8, "quantization_config": [1]},
    {"hidden_size": 2**62, "num_attention_heads": 32, "num_hidden_layers": 8},
    {"hidden_size": 4096, "num_attention_heads": 32, "num_hidden_layers": 8, "rope_theta": float("nan")},
    {"hidden_size": "4096", "num_attention_heads": [32], "num_hidden_layers": {"a": 1}},
    [1, 2, 3],
    {"architectures": {"x": 1}, "hidden_size": 8, "num_attention_heads": 1, "num_hidden_layers": 1},
]
YAMLS = [
    "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n",
    "defaults:\n  - ppo_trainer\n  - _self_\ntrainer:\n  nnodes: ${oc.dict.values:trainer}\n",
    "defaults: 3\n",
    "!!python/object/apply:os.system ['true']\n",
    "trainer: {nnodes: [1, 2], n_gpus_per_node: .nan}\n",
    "- a\n- b\n",
    "x: " + "[" * 3000 + "]" * 3000 + "\n",
]


def make_input(seed: str, k: int, seeds, weights):
    rng = random.Random(f"{seed}:{k}")
    base = seeds[rng.randrange(len(seeds))]
    ops = [
        (rng.choice(fuzzing.KINDS), rng.randrange(1 << 16), rng.randrange(1 << 16)) for _ in range(rng.randint(1, 5))
    ]
    command = rng.choices(list(weights), weights=list(weights.values()))[0]
    return rng, base, command, fuzzing.mutate(base.text, ops, [s.text for s in seeds])


def argv_for(rng, command: str, path: Path, other: Path, folder: Path, limit: float) -> list[str]:
    limits = ["--time-limit", str(limit)]
    fmt = ["--format", "json"] if rng.random() < 0.3 else []
    if command == "explain":
        return ["explain", rng.choice(EXPLAIN_IDS)]
    if command == "rules":
        return ["rules", *fmt]
    if command == "options":  # a hostile option value on check or memory
        name, values = rng.choice(HOSTILE_OPTIONS)
        verb = rng.choice(["check", "memory"])
        return [verb, str(path), name, rng.choice(values), *limits, *fmt]
    extra: list[str] = []
    if rng.random() < 0.1:
        config = folder / "config.json"
        config.write_text(json.dumps(rng.choice(MODEL_CONFIGS)))
        extra += ["--model-config", str(config)]
    if command in ("check", "memory") and rng.random() < 0.08:
        pyproject = folder / "pyproject.toml"
        pyproject.write_text(rng.choice(PYPROJECTS))
        extra += ["--config", str(pyproject)]
    if command == "diff":
        out = (
            ["-o", rng.choice(["/nonexistent/x", "/", "/dev/full", str(folder / "d.out")])]
            if rng.random() < 0.1
            else []
        )
        dfmt = ["--format", rng.choice(["json", "markdown", "sarif", "github", "junit", "html", "text"])]
        return ["diff", str(other), str(path), *dfmt, *out, *limits, *extra]
    if command == "report":
        target = rng.choice(["/nonexistent/x.html", "/", "/dev/full"]) if rng.random() < 0.2 else str(folder / "r.html")
        return ["report", str(path), "-o", target, *limits, *extra]
    if command == "plan":
        return ["plan", str(path), "--top", "2", *limits, *fmt, *extra]
    if command == "mesh":
        return ["mesh", str(path), *limits, *fmt]
    if command == "check" and rng.random() < 0.7:
        extra.append("--no-fix-proof")  # the proof re-judges each fix: most inputs without it, for speed
    return [command, str(path), *limits, *fmt, *extra]


SITE = re.compile(r"\((\w+(?:Error|Exception|Exceeded)?): .*? at ([\w.]+:\d+)\)")


def run_one(argv: list[str]) -> tuple[str | None, float, str]:
    """(the failure class or None, CPU seconds, what the command printed)."""
    from shardcheck.cli import main

    out = io.StringIO()
    start = time.process_time()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            code = main(argv)
    except BaseException as exc:  # noqa: BLE001 — the contract broken: anything out of main
        if isinstance(exc, KeyboardInterrupt):
            raise
        import traceback

        tb = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{Path(tb.filename).name}:{tb.lineno}"
        return f"escaped {type(exc).__name__} at {where}", time.process_time() - start, out.getvalue()
    elapsed = time.process_time() - start
    text = out.getvalue()
    if code == 4 or ("internal error" in text and argv[0] not in ("explain", "rules")):
        m = SITE.search(text)
        return (f"internal {m.group(1)} at {m.group(2)}" if m else f"internal: {text.strip()[-160:]}"), elapsed, text
    if "Traceback (most recent call last)" in text:
        return "traceback printed", elapsed, text
    if (
        "--format" in argv
        and argv[argv.index("--format") + 1] == "json"
        and argv[0] not in ("explain",)
        and "-o" not in argv
    ):
        try:
            json.JSONDecoder().raw_decode(text.lstrip())
        except ValueError:
            return "json mode printed no JSON", elapsed, text
    return None, elapsed, text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=1000)
    parser.add_argument("--seed", default="34")
    parser.add_argument("--time-limit", type=float, default=2.0, help="--time-limit given to each command")
    parser.add_argument("--out", default="", help="folder for the summary and the failing inputs")
    parser.add_argument("--only", type=int, default=None)
    parser.add_argument("--part", default="0/1", help="I/N: run the inputs k with k % N == I (parallel runs)")
    args = parser.parse_args()
    from shardcheck.guard import run_guarded

    seeds = fuzzing.seeds()
    work = Path(tempfile.mkdtemp(prefix="shardcheck-fuzzcli-"))
    for folder in ("examples", "tests/data/cases"):
        shutil.copytree(ROOT / folder, work / folder)
    out = Path(args.out) if args.out else None
    if out:
        (out / "inputs").mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    times: dict[str, float] = {}
    classes: dict[str, list[int]] = {}
    slow: list[tuple[float, int, str]] = []
    start = time.time()
    part, parts = (int(x) for x in args.part.split("/"))
    ks = [args.only] if args.only is not None else range(part, args.inputs, parts)
    for n, k in enumerate(ks):
        rng, base, command, data = make_input(args.seed, k, seeds, WEIGHTS)
        folder = work / Path(base.name).parent if (work / Path(base.name).parent).is_dir() else work
        folder = folder / f"k{k}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "run.sh"
        path.write_bytes(data)
        if rng.random() < 0.03:  # a verl YAML config of the script's own
            (folder / "fz.yaml").write_text(rng.choice(YAMLS))
            path.write_bytes(
                data + b"\npython3 -m verl.trainer.main_ppo --config-path=. --config-name=fz trainer.nnodes=1\n"
            )
        other = folder / "before.sh"
        other.write_bytes(base.text)
        text = ""
        if command == "reader":
            t0 = time.process_time()
            try:
                # the reader alone: a wall-clock guard well above its bounds (the machine is shared)
                _, why = run_guarded(lambda: fuzzing.run_command("reader", path, data), seconds=5 * args.time_limit)
                error = f"reader past {5 * args.time_limit:g} s" if why else None
            except Exception as exc:  # noqa: BLE001
                import traceback

                tb = traceback.extract_tb(exc.__traceback__)[-1]
                error = f"reader {type(exc).__name__} at {Path(tb.filename).name}:{tb.lineno}"
            elapsed = time.process_time() - t0
            argv = ["(reader)", str(path)]
        else:
            argv = argv_for(rng, command, path, other, folder, args.time_limit)
            error, elapsed, text = run_one(argv)
            # CPU seconds, not wall: the machine is shared, and a niced run waits for a core
            if error is None and elapsed > args.time_limit + 2 and command not in ("explain", "rules"):
                error = f"past its time limit: {elapsed:.1f} CPU s"
        counts[command] = counts.get(command, 0) + 1
        times[command] = times.get(command, 0.0) + elapsed
        slow = sorted([*slow, (elapsed, k, command)], reverse=True)[:8]
        if error is not None:
            classes.setdefault(f"{command}: {error}", []).append(k)
            if out and len(classes[f"{command}: {error}"]) <= 3:
                shutil.copytree(folder, out / "inputs" / f"{k}-{command}", dirs_exist_ok=True)
                (out / "inputs" / f"{k}-{command}" / "argv.json").write_text(json.dumps(argv))
                (out / "inputs" / f"{k}-{command}" / "output.txt").write_text(text[-20000:])
        shutil.rmtree(folder, ignore_errors=True)
        if out and (n % 2000 == 0 or n == len(ks) - 1):
            summary = {
                "seed": args.seed,
                "inputs_run": n + 1,
                "seconds": round(time.time() - start),
                "per_command": {c: [counts[c], round(times[c] / counts[c] * 1000, 1)] for c in counts},
                "classes": {c: {"count": len(v), "first": v[:5]} for c, v in sorted(classes.items())},
                "slowest": slow,
            }
            (out / f"summary-{part}.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps({"inputs": sum(counts.values()), "classes": {c: len(v) for c, v in classes.items()}}, indent=1))


if __name__ == "__main__":
    main()
