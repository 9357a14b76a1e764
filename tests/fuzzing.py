"""Mutation fuzzing of shardcheck's inputs, shared by tests/test_fuzz.py (hypothesis, in CI) and bench/fuzz.py
(long runs): seed scripts from the repository, mutations of their bytes, lines, numbers, quotes and unicode,
splices of hostile snippets, and one driver per command that runs in-process under the per-input guard.

A run of an input passes when the command returns (a verdict or a one-line input error), within the time
and memory budget, and what it returns renders; any exception, a time-out or a memory blow-up is a failure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Small launches of each framework, to fuzz alongside the repository's real scripts.
SMALL_SEEDS = {
    "verl-fsdp.sh": (
        "#!/bin/bash\nset -x\nNNODES=${NNODES:-1}\nGPUS=8\nMODEL=Qwen/Qwen3-8B\nSP=2\n"
        "python3 -m verl.trainer.main_ppo \\\n  trainer.nnodes=$NNODES trainer.n_gpus_per_node=$GPUS \\\n"
        "  actor_rollout_ref.model.path=$MODEL actor_rollout_ref.rollout.name=vllm \\\n"
        "  actor_rollout_ref.actor.ulysses_sequence_parallel_size=$SP data.train_batch_size=$((GPUS * 32)) \\\n"
        "  actor_rollout_ref.actor.ppo_mini_batch_size=64 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4 \\\n"
        '  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 "$@"\n'
    ),
    "verl-megatron.sh": (
        "#!/bin/bash\nTP=2\nPP=2\nARGS=(actor_rollout_ref.actor.megatron.tensor_model_parallel_size=$TP\n"
        "      actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=$PP)\n"
        "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer trainer.nnodes=2 "
        'trainer.n_gpus_per_node=8 actor_rollout_ref.model.path=Qwen/Qwen3-30B-A3B "${ARGS[@]}" '
        "actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.tensor_model_parallel_size=4\n"
    ),
    "megatron-lm.sh": (
        "#!/bin/bash\nGPUS_PER_NODE=8\nNNODES=${NNODES:-2}\nL=24\n"
        "torchrun --nnodes $NNODES --nproc-per-node $GPUS_PER_NODE pretrain_gpt.py --num-layers $L "
        "--hidden-size 1024 --num-attention-heads 16 --seq-length 4096 --max-position-embeddings 4096 "
        "--micro-batch-size 1 --global-batch-size 64 --tensor-model-parallel-size 2 "
        "--pipeline-model-parallel-size 2 --num-experts 8 --expert-model-parallel-size 2 --bf16 "
        "--train-iters 1000 --lr 3e-4\n"
    ),
}

# Lines a careless or hostile author could put in a script (issue 17's classes and their relatives).
HOSTILE_LINES = (
    "X=$((1<<-1))",
    "X=$(( 1 << -1 ))",
    "X=$((9**9**9))",
    "X=$((2**63))",
    "X=$((" + "9" * 5000 + "))",
    "X=" + "9" * 5000,
    "printf -v X '%99999999999s' a",
    "a[-1]=3",
    "a[2**40]=1",
    "a[1099511627776]=1",
    "X=${a[-7]}",
    "X=$X$X$X$X",
    'A=("${A[@]}" "${A[@]}")',
    "f() { f; f; }; f",
    "X=${X%*b*}",
    "X=${X//a/$X$X}",
    "source /dev/zero",
    "source /proc/self/fd/0",
    "source " + "a" * 5000,
    ". ./missing.sh",
    "source $0",
    "X=$((" + "(" * 300 + "1" + ")" * 300 + "))",
    "X=" + "${A:-" * 200 + "}" * 200,
    "eval X=1",
    "for i in 1 2; do X=$X$X; done",
    "if [ $A ]; then X=1; fi",
    "X=$(cat /etc/passwd)",
    "X=`id`",
    "export $(cat .env)",
    "X=${!A}",
    "X=${#A[@]}",
    "X=${A:0:99999999999999999999}",
    "trainer.nnodes=0",
    'X="unterminated',
    "X='unterminated",
    "X=${unterminated",
    "case $A in a) X=1;; esac",
    "X=$'\\x00'",
    "declare -A M=([a]=1)",
    "set -- a b c",
    "shift 99999999999999999999",
    "read -r X",
    "let X=2**64",
)

EXTREME_NUMBERS = (
    "0",
    "-1",
    "1.5",
    "1e400",
    "-0",
    "abc",
    "",
    "9223372036854775808",
    "99999999999",
    "9" * 5000,
    "0x7fffffffffffffff",
    "100000000",
    "65536",
    "3",
    "7",
    "2**40",
    "1/0",
    "nan",
    "inf",
    "0o7",
)

UNICODE = ("é", "∞", "٣", "\u202e", "\u200b", "𝟘", "ß", "\ufeff", "\u0301", "ﬁ", "🙂", "\t", "\r", "\x0b", "\x1b[31m")

QUOTES = ("'", '"', "\\", "$(", "${", "$((", "`", ")", "}", "))", "\\\n", "#", ";", "&&", "|", "<<", "<<-", "=", "+")

KINDS = (
    "byte",
    "insert",
    "delete",
    "line-delete",
    "line-dup",
    "line-swap",
    "splice",
    "hostile",
    "number",
    "quote",
    "unicode",
    "truncate",
)


@dataclass(frozen=True)
class Seed:
    name: str
    text: bytes


def seeds() -> list[Seed]:
    """The repository's own scripts (the shared cases copied under tests/data, examples/) and SMALL_SEEDS."""
    paths = sorted((ROOT / "tests" / "data" / "cases").glob("*.sh")) + sorted((ROOT / "examples").rglob("*.sh"))
    paths += sorted((ROOT / "src" / "shardcheck" / "examples").glob("*.sh"))
    out = [Seed(str(p.relative_to(ROOT)), p.read_bytes()) for p in paths]
    out += [Seed(name, text.encode()) for name, text in SMALL_SEEDS.items()]
    return out


def mutate(data: bytes, ops: list[tuple[str, int, int]], pool: list[bytes]) -> bytes:
    """Apply mutation ``ops`` (kind, position, choice) to ``data``; ``pool``: other seeds to splice from."""
    for kind, pos, choice in ops:
        n = len(data)
        at = pos % (n + 1)
        lines = data.split(b"\n")
        line = pos % len(lines)
        if kind == "byte" and n:
            data = data[: at % n] + bytes([choice % 256]) + data[at % n + 1 :]
        elif kind == "insert":
            data = data[:at] + bytes([choice % 256]) * (1 + choice % 3) + data[at:]
        elif kind == "delete":
            data = data[:at] + data[at + 1 + choice % 16 :]
        elif kind == "line-delete":
            data = b"\n".join(lines[:line] + lines[line + 1 :])
        elif kind == "line-dup":
            data = b"\n".join(lines[: line + 1] + [lines[line]] * (1 + choice % 4) + lines[line + 1 :])
        elif kind == "line-swap":
            other = choice % len(lines)
            lines[line], lines[other] = lines[other], lines[line]
            data = b"\n".join(lines)
        elif kind == "splice" and pool:
            donor = pool[choice % len(pool)].split(b"\n")
            start = (choice // 7) % len(donor)
            data = b"\n".join(lines[:line] + donor[start : start + 1 + choice % 5] + lines[line:])
        elif kind == "hostile":
            data = b"\n".join(lines[:line] + [HOSTILE_LINES[choice % len(HOSTILE_LINES)].encode()] + lines[line:])
        elif kind == "number":
            numbers = list(re.finditer(rb"\d+(?:\.\d+)?", data))
            if numbers:
                m = numbers[pos % len(numbers)]
                data = data[: m.start()] + EXTREME_NUMBERS[choice % len(EXTREME_NUMBERS)].encode() + data[m.end() :]
        elif kind == "quote":
            data = data[:at] + QUOTES[choice % len(QUOTES)].encode() + data[at:]
        elif kind == "unicode":
            text = UNICODE[choice % len(UNICODE)].encode("utf-8")
            data = data[:at] + (text if choice % 5 else b"\xff\xfe") + data[at:]
        elif kind == "truncate":
            data = data[: max(at, n // 2)]
    return data


def _render_check(result) -> None:
    from shardcheck.report.json_report import render_json
    from shardcheck.report.text import render_text

    json.loads(render_json([result]))
    render_text([result])


def run_command(command: str, path: Path, text: bytes) -> None:
    """Run ``command`` on the script at ``path`` (holding ``text``) the way the CLI does, and render its output.
    Raises whatever the command raises (a failure of the input contract)."""
    from shardcheck import api
    from shardcheck.errors import InputError

    if command == "reader":
        from shardcheck.inputs.bash import read_bash_text
        from shardcheck.inputs.launch import find_launches

        try:
            find_launches(read_bash_text(text, str(path), real_path=path).commands)
        except InputError:
            pass
    elif command == "check":
        _render_check(api.check(path))
    elif command == "memory":
        from shardcheck.report.memory_report import render_memory_json, render_memory_text

        result = api.memory(path)
        json.loads(render_memory_json([result]))
        render_memory_text([result], explain=True)
    elif command == "mesh":
        from shardcheck.report.mesh_report import render_mesh_json, render_mesh_text

        try:
            job = api.resolve_script(path)
        except InputError:
            return
        result = api.mesh(job, str(path))
        json.loads(render_mesh_json(result))
        render_mesh_text(result)
    elif command == "plan":
        from shardcheck.plan import PlanError, plan_script
        from shardcheck.report.plan_report import render_plan_json, render_plan_text

        try:
            result = plan_script(path, top=3)
        except (InputError, PlanError):
            return
        json.loads(render_plan_json(result))
        render_plan_text(result)
    else:
        raise ValueError(f"no command {command!r}")


def commands() -> tuple[str, ...]:
    return ("reader", "check", "memory", "mesh", "plan")
