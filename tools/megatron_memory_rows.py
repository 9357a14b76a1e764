"""Collect Megatron-LM functional tests' measured peak memory as validation rows for ``shardcheck memory``.

Megatron-LM's functional tests (NVIDIA/Megatron-LM, tests/functional_tests/test_cases/<model>/<case>/)
keep ``mem-max-allocated-bytes`` per iteration in their golden values: ``torch.cuda.memory_stats()
["allocated_bytes.all.peak"]``, logged by the last rank, the one that writes tensorboard
(megatron/training/training.py ``training_log``; megatron/training/global_vars.py
``_set_tensorboard_writer``: ``args.rank == world_size - 1``), so the last pipeline stage. The recipes
(tests/test_utils/recipes/h100/{gpt,moe}.yaml) run each case on one node of 8 GPUs.

For each chosen case this writes ``tests/data/memory_validation/<case>.sh``: the case's MODEL_ARGS as a
``torchrun --nproc-per-node 8 pretrain_gpt.py`` launch (paths replaced by placeholders; the GPT-2 BPE
vocab file replaced by ``--vocab-size 50257``, its size), and one row in ``rows.json``: source (repo,
commit, golden file), the measured peak (the largest over the iterations), and shardcheck's prediction
for the last stage when ``--record`` is given.

Usage: python tools/megatron_memory_rows.py GIT_DIR_OF_MEGATRON_LM [--record]
(GIT_DIR: a clone's .git or a bare mirror; nothing in it is executed.)
       python tools/megatron_memory_rows.py --markdown   (the table of docs/validation.md from rows.json)
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "memory_validation"
CASES = ROOT / "tests" / "data" / "memory_validation" / "cases.txt"  # one "<model>/<case>" per line
PLATFORM = "golden_values_dev_dgx_h100.json"
# flags whose values are paths or logging: dropped (they do not change memory). The training length and the
# optimizer's schedule (--train-iters, --lr, --lr-*, --min-lr, --weight-decay, --clip-grad) are kept: without
# them Megatron-LM stops at start-up (MLM-TRAIN-LENGTH), so the copies would not be the launches measured.
DROP_PREFIX = (
    "--log-",
    "--tensorboard",
    "--save",
    "--load",
    "--data-",
    "--vocab-file",
    "--merge-file",
    "--split",
    "--wandb",
    "--ckpt-",
    "--dist-ckpt",
    "--async-save",
    "--use-persistent-ckpt-worker",
    "--exit-",
    "--timing-log-level",
    "--eval-",
    "--tokenizer-model",
    "--distributed-backend",
    "--use-checkpoint-args",
    "--no-load-optim",
    "--no-load-rng",
    "--finetune",
    "--deterministic-mode",
    "--save-interval",
    "--use-mcore-models",
)
GPT2_BPE_VOCAB = 50257  # entries of the GPT-2 BPE vocab.json the cases name with --vocab-file
# Features shardcheck does not model: a row using one is kept and reported, but not counted in the aims.
NOT_MODELLED = {
    "--cuda-graph-impl": "CUDA graphs (static buffers and the graphs' private memory pools)",
    "--tp-comm-overlap": "TP communication overlap (Transformer Engine's userbuffers)",
}


# FP8 compute is modelled (memory/activations.py ``fp8_layer_delta``, memory/estimate.py ``fp8_kernels``) but
# validated only by these rows: an FP8 row with no other unmodelled feature counts in the aims only when its
# ratio lands within the largest |error| of the modelled bf16 rows; else it is reported with this reason.
FP8_FLAG = "--fp8-format"
FP8_OUTSIDE = "fp8 compute: modelled, but this row's error is beyond the modelled bf16 rows' largest ({:.1%})"


def fp8_outside_spread(rows: list[dict], fp8_cases: set[str]) -> None:
    """Mark the FP8 rows whose ratio is beyond the largest |error| of the modelled bf16 rows (in place)."""
    bf16 = [abs(r["ratio"] - 1) for r in rows if not r["not_modelled"] and r["case"] not in fp8_cases and r["ratio"]]
    largest = max(bf16)
    for r in rows:
        if r["case"] in fp8_cases and not r["not_modelled"] and (r["ratio"] is None or abs(r["ratio"] - 1) > largest):
            r["not_modelled"].append(FP8_OUTSIDE.format(largest))


def git_show(git_dir: str, rev: str, path: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, "show", f"{rev}:{path}"], capture_output=True, text=True, check=True
    ).stdout


def launch(case: str, args: dict) -> str:
    words = []
    for flag, value in args.items():
        if flag.startswith(DROP_PREFIX) or value is False or value is None:
            continue
        if value is True:
            words.append(flag)
        elif isinstance(value, list):  # nargs='+': the launcher writes the items as separate words
            words.append(" ".join([flag, *(shlex.quote(str(v)) for v in value)]))
        elif isinstance(value, str) and value.startswith("[") and value.endswith("]"):
            # tests/functional_tests/shell_test_utils/_run_training.sh strips the brackets, words stay apart
            words.append(" ".join([flag, *(shlex.quote(v) for v in value[1:-1].split())]))
        else:
            words.append(f"{flag} {shlex.quote(str(value))}")
    if "--vocab-file" in args and "--vocab-size" not in args:
        words.append(f"--vocab-size {GPT2_BPE_VOCAB}")
    body = " \\\n    ".join(words)
    return (
        f"#!/bin/bash\n# Megatron-LM functional test {case} (model_config.yaml MODEL_ARGS; paths and logging "
        f"flags dropped)\ntorchrun --nnodes 1 --nproc-per-node 8 pretrain_gpt.py \\\n    {body}\n"
    )


SUMMARY = [
    ("--tensor-model-parallel-size", "TP"),
    ("--pipeline-model-parallel-size", "PP"),
    ("--num-virtual-stages-per-pipeline-rank", "VPP"),
    ("--num-layers-per-virtual-pipeline-stage", "L/VPP"),
    ("--context-parallel-size", "CP"),
    ("--expert-model-parallel-size", "EP"),
    ("--num-layers", "L"),
    ("--hidden-size", "h"),
    ("--num-experts", "E"),
    ("--seq-length", "s"),
    ("--micro-batch-size", "mbs"),
]
FEATURES = {
    "--attention-backend unfused": "unfused attn",
    "--transformer-impl local": "local impl",
    "--multi-latent-attention": "MLA",
    "--mtp-num-layers": "MTP",
    "--pipeline-model-parallel-layout": "layout",
    "--recompute-granularity full": "full recompute",
    "--recompute-granularity selective": "selective",
    "--fine-grained-activation-offloading": "act. offload",
    "--use-megatron-fsdp": "M-FSDP",
    "--fp8-param-gather": "fp8 params",
    "--fp8-format": "fp8",
    "--cross-entropy-loss-fusion": "CE fusion",
    "--sequence-parallel": "SP",
    "--use-distributed-optimizer": "dist-opt",
    "--swiglu": "SwiGLU",
    "--cuda-graph-impl": "CUDA graphs",
}


def summary(text: str) -> str:
    words = text.replace("\\\n", " ").split()
    values = {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("--")}
    parts = [f"{name} {values[flag]}" for flag, name in SUMMARY if flag in values]
    joined = " ".join(words)
    parts += [name for flag, name in FEATURES.items() if flag in joined]
    return ", ".join(parts)


def markdown() -> str:
    rows = json.loads((OUT / "rows.json").read_text())
    head = (
        "| # | Megatron-LM functional test (H100 golden values) | configuration | measured GiB | predicted GiB "
        "| ratio | modelled |"
    )
    out = [head, "|---|---|---|---|---|---|---|"]
    for i, r in enumerate(rows, 1):
        text = (OUT / f"{r['case']}.sh").read_text()
        out.append(
            f"| {i} | `{r['case'].split('__', 1)[1]}` | {summary(text)} | {r['measured_allocated'] / 2**30:.2f} "
            f"| {r['predicted_allocated'] / 2**30:.2f} | {r['ratio']:.3f} | "
            f"{'yes' if not r['not_modelled'] else 'no: ' + '; '.join(r['not_modelled'])} |"
        )
    return "\n".join(out)


def main() -> int:
    if "--markdown" in sys.argv:
        print(markdown())
        return 0
    p = argparse.ArgumentParser()
    p.add_argument("git_dir")
    p.add_argument("--rev", default="HEAD")
    p.add_argument("--record", action="store_true", help="record shardcheck's prediction and ratio in rows.json")
    a = p.parse_args()
    commit = subprocess.run(
        ["git", "--git-dir", a.git_dir, "rev-parse", a.rev], capture_output=True, text=True, check=True
    ).stdout.strip()
    rows, fp8_cases = [], set()
    for case in [c.strip() for c in CASES.read_text().splitlines() if c.strip() and not c.startswith("#")]:
        base = f"tests/functional_tests/test_cases/{case}"
        golden = json.loads(git_show(a.git_dir, commit, f"{base}/{PLATFORM}"))
        values = [v for v in golden["mem-max-allocated-bytes"]["values"].values() if v != "nan"]
        config = yaml.safe_load(git_show(a.git_dir, commit, f"{base}/model_config.yaml"))
        name = case.replace("/", "__")
        (OUT / f"{name}.sh").write_text(launch(case, config["MODEL_ARGS"]))
        args = config["MODEL_ARGS"]
        if args.get(FP8_FLAG) not in (None, False):
            fp8_cases.add(name)
        rows.append(
            {
                "case": name,
                "source": f"NVIDIA/Megatron-LM@{commit[:12]} {base}/{PLATFORM}",
                "test_type": config.get("TEST_TYPE"),
                "device": "h100",
                "not_modelled": [why for flag, why in NOT_MODELLED.items() if args.get(flag) not in (None, False)],
                "measured_allocated": int(max(values)),
            }
        )
    if a.record:
        sys.path.insert(0, str(ROOT / "src"))
        from shardcheck.api import resolve_script
        from shardcheck.memory.validation import predict

        for row in rows:
            # main after core_v0.19.0: the newest flag table (tests/test_memory_validation.py MINOR)
            job = resolve_script(OUT / f"{row['case']}.sh", megatron_core_version="0.19")
            predicted = predict(job, row["device"])
            row["predicted_allocated"] = predicted
            row["ratio"] = round(predicted / row["measured_allocated"], 4) if predicted else None
        fp8_outside_spread(rows, fp8_cases)
    (OUT / "rows.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
