"""Benchmark: `shardcheck check` on the built-in example, whole process, against megatron-core itself.

Prints CPU seconds (user + sys of the child process, median of N runs) for
  1. `python -c pass`                       (the interpreter floor)
  2. `shardcheck check <example>`           (the whole CLI)
  3. megatron-core initialising the same layout on torch's fake process group (when installed)
and an in-process breakdown of shardcheck's own stages: imports, bash parse, Hydra overrides,
verl resolution, rules, report.

The two are run alternately, so that both see the same machine load; the ratio is the figure to watch
(issue 16: at most 5x). Bytecode is compiled first, as an installed package has it.

Usage: python bench/bench_check.py [--runs N] [--script PATH]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEGATRON_INIT = """
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
from megatron.core import parallel_state as ps
dist.init_process_group(backend="fake", store=FakeStore(), world_size={world}, rank=0)
ps.initialize_model_parallel(tensor_model_parallel_size={tp}, pipeline_model_parallel_size={pp},
    context_parallel_size={cp}, expert_model_parallel_size={ep}, expert_tensor_parallel_size={etp},
    create_gloo_process_groups=False)
assert ps.get_data_parallel_world_size() == {dp}
"""


def child_cpu(cmd: list[str], env=None) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def median_cpu(cmd: list[str], runs: int) -> tuple[float, float, float]:
    """(minimum CPU, median CPU, median wall) over ``runs``; the minimum is the least noisy figure."""
    samples = [child_cpu(cmd) for _ in range(runs)]
    cpu = [s[0] for s in samples]
    return min(cpu), statistics.median(cpu), statistics.median(s[1] for s in samples)


def stages(script: str) -> list[tuple[str, float]]:
    """In-process wall seconds per stage, in a fresh interpreter (so imports are cold)."""
    code = f"""
import time, json, sys
t0 = time.perf_counter()
import tree_sitter, tree_sitter_bash
t1 = time.perf_counter()
from shardcheck.inputs.bash import read_bash
from shardcheck.inputs.launch import find_launches
from shardcheck.inputs.hydra_overrides import parse_hydra_args
from shardcheck.frameworks.verl.resolve import resolve_verl
from shardcheck.rules.registry import all_rules, run_rules
all_rules()
from shardcheck.api import Result
from shardcheck.report.text import render_text
t2 = time.perf_counter()
reading = read_bash({script!r})
launch = find_launches(reading.commands)[0]
t3 = time.perf_counter()
hydra = parse_hydra_args(launch.args)
t4 = time.perf_counter()
job = resolve_verl(launch, hydra, {script!r})
t5 = time.perf_counter()
findings, skipped = run_rules(job)
t6 = time.perf_counter()
render_text([Result({script!r}, job, findings, skipped)])
t7 = time.perf_counter()
heavy = ", ".join(m for m in ("hydra", "omegaconf", "antlr4", "rich", "yaml") if m in sys.modules) or "none"
print(json.dumps([["import tree-sitter + bash grammar", t1-t0], ["import shardcheck modules (all rules)", t2-t1],
    ["parse + evaluate bash", t3-t2], ["parse Hydra overrides", t4-t3], ["resolve verl config + model", t5-t4],
    ["rules", t6-t5], ["report", t7-t6], ["heavy modules imported: " + heavy, 0.0]]))
"""
    import json

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def fix_proof(script: str, runs: int) -> None:
    """The cost of proving fixes (plan/fixes.py): the example with its training TP set to 3 (errors: TP does
    not divide the heads or the world), checked with and without ``--no-fix-proof``; a valid script pays nothing
    (no error, no proof)."""
    import re
    import tempfile

    text = Path(script).read_text()
    broken, n = re.subn(r"(?m)^train_tp=\S+", "train_tp=3", text)
    if not n:
        print("fix proof: the script has no train_tp= line to break; skipped")
        return
    with tempfile.TemporaryDirectory() as tmp:
        bad = Path(tmp) / "broken_tp3.sh"
        bad.write_text(broken)
        base = [sys.executable, "-m", "shardcheck", "check", str(bad)]
        off, on = side_by_side([[*base, "--no-fix-proof"], base], runs)
    print(f"check, 1 script with errors, --no-fix-proof  min {off[0]:.3f}  median {off[1]:.3f}   wall {off[2]:.3f}")
    print(f"check, same script, fixes proven          min {on[0]:.3f}  median {on[1]:.3f}   wall {on[2]:.3f}")
    print(f"proof of the fixes                        +{on[0] - off[0]:.3f} s CPU (minimum)")


def side_by_side(commands: list[list[str]], runs: int) -> list[tuple[float, float, float]]:
    """(minimum CPU, median CPU, median wall) of each command, run alternately so that both see the same load."""
    samples: list[list[tuple[float, float]]] = [[] for _ in commands]
    for _ in range(runs):
        for i, cmd in enumerate(commands):
            samples[i].append(child_cpu(cmd))
    return [
        (min(c for c, _ in s), statistics.median(c for c, _ in s), statistics.median(w for _, w in s)) for s in samples
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--script", default=str(ROOT / "src/shardcheck/examples/qwen3_235b_256k.sh"))
    args = parser.parse_args()
    # As installed packages are: with bytecode (pip writes it; PYTHONDONTWRITEBYTECODE would make every run
    # compile shardcheck's sources again).
    import compileall

    compileall.compile_dir(str(ROOT / "src" / "shardcheck"), quiet=1)
    floor, cli = side_by_side(
        [[sys.executable, "-c", "pass"], [sys.executable, "-m", "shardcheck", "check", args.script]], args.runs
    )
    print("CPU seconds of the whole process (user + sys), run alternately: minimum and median of the runs")
    print(f"python -c pass                      min {floor[0]:.3f}  median {floor[1]:.3f}")
    print(f"shardcheck check (example)          min {cli[0]:.3f}  median {cli[1]:.3f}   wall {cli[2]:.3f}")
    print(
        f"shardcheck / python -c pass         {cli[0] / floor[0]:.1f}x (minimum)  {cli[1] / floor[1]:.1f}x (median)"
        "   target <= 5x"
    )
    fix_proof(args.script, args.runs)
    have_megatron = importlib.util.find_spec("megatron") and importlib.util.find_spec("torch")
    if have_megatron:
        code = MEGATRON_INIT.format(world=256, tp=2, pp=16, cp=8, ep=16, etp=1, dp=1)
        mc = median_cpu([sys.executable, "-c", code], max(3, args.runs // 2))
        print(f"megatron-core init, same layout     min {mc[0]:.3f}  median {mc[1]:.3f}   wall {mc[2]:.3f}")
        print(f"shardcheck is {mc[0] / cli[0]:.1f}x cheaper (minimum) / {mc[1] / cli[1]:.1f}x (median)")
    else:
        print("megatron-core init: not installed (pip install -e '.[verify]')")
    print(f"shardcheck above the interpreter    min {cli[0] - floor[0]:.3f}")
    print("breakdown (wall, one cold process):")
    total = 0.0
    for name, seconds in stages(args.script):
        total += seconds
        print(f"  {name:<40} {seconds * 1000:8.1f} ms")
    print(f"  {'total in-process':<40} {total * 1000:8.1f} ms")
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
