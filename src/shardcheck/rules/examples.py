"""Each rule's examples: a bad case and a good case, as data (``rules/cases/<ID>.yml``, sqlfluff style).

A case is a launch (one of :data:`LAUNCHES`, a small valid launch, plus the words the case adds; a
raw script; or Megatron-Core sizes without a script) and, for the bad case, the findings the rule
must report, message and fix exactly. ``tests/test_rule_cases.py`` runs every case; the rule pages
(``shardcheck explain``, docs/rules/) show them as the rule's Bad and Good examples.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

CASES_DIR = Path(__file__).with_name("cases")

# A verl launch that is valid apart from what a case changes: batch sizes every DP up to 16, and 32, divides.
VERL_BATCH = (
    "data.train_batch_size=1441440 actor_rollout_ref.actor.ppo_mini_batch_size=1441440 "
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 "
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 "
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1 critic.ppo_micro_batch_size_per_gpu=1 "
    "actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.tensor_model_parallel_size=1"
)
# A small MoE model given as Megatron-LM flags (48 layers, 32 heads, 4 query groups, 128 experts).
SMALL_MOE = (
    "--num-layers 48 --hidden-size 2048 --num-attention-heads 32 --group-query-attention --num-query-groups 4 "
    "--num-experts 128 --moe-router-topk 8 --seq-length 4096 --max-position-embeddings 40960"
)


def verl_launch(
    overrides: str = "",
    *,
    model: str = "Qwen3-30B-A3B",
    nodes: int = 1,
    gpus: int = 8,
    before: str = "",
    config: str = "--config-name=ppo_megatron_trainer",
) -> str:
    """A verl GRPO launch of ``model`` on ``nodes`` × ``gpus``, valid apart from ``overrides`` and ``before``."""
    words = " ".join(textwrap.dedent(overrides).split())
    model_path = model if model.startswith("/") else f"/models/{model}"
    return (
        f"{before}\npython3 -m verl.trainer.main_ppo {config} actor_rollout_ref.model.path={model_path} "
        f"trainer.nnodes={nodes} trainer.n_gpus_per_node={gpus} {VERL_BATCH} {words}\n"
    )


# The training length and peak learning rate a Megatron-LM launch needs (MLM-TRAIN-LENGTH, MLM-LR-NEEDED).
MEGATRON_LM_SCHEDULE = "--train-iters 1000 --lr 3e-4"


def megatron_lm_launch(
    flags: str = "",
    *,
    model: str = SMALL_MOE,
    nodes: int = 1,
    gpus: int = 8,
    schedule: str = MEGATRON_LM_SCHEDULE,
) -> str:
    """A valid Megatron-LM launch (torchrun + pretrain_gpt.py) apart from ``flags``; the last flag wins.

    ``schedule``'s flags are added unless ``flags`` give their own (``--train-samples`` stands for
    ``--train-iters``); ``schedule=""`` leaves them out."""
    given = {w.split("=", 1)[0] for w in flags.split()}
    words = schedule.split()
    own = [
        " ".join(words[i : i + 2])
        for i in range(0, len(words), 2)
        if words[i] not in given and not (words[i] == "--train-iters" and "--train-samples" in given)
    ]
    return (
        f"torchrun --nnodes {nodes} --nproc-per-node {gpus} pretrain_gpt.py {model} --micro-batch-size 1 "
        f"--global-batch-size 256 {' '.join([*own, flags]) if own else flags}\n"
    )


def slime_launch(
    flags: str = "", *, model: str = SMALL_MOE, batch: str = "--rollout-batch-size 32", before: str = ""
) -> str:
    """A valid slime launch on one 8-GPU node, its rollout on 8 GPUs of its own, apart from ``flags``;
    ``before``: lines in front of it (a ``ray start``)."""
    return (
        (f"{before}\n" if before else "")
        + "ray job submit --address=http://127.0.0.1:8265 -- python3 train.py --actor-num-nodes 1 "
        "--actor-num-gpus-per-node 8 --rollout-num-gpus 8 --rollout-num-gpus-per-engine 8 "
        f"{batch} --n-samples-per-prompt 8 --global-batch-size 256 {model} {flags}\n"
    )


LAUNCHES = {
    "verl": (
        verl_launch,
        "A verl launch (Qwen3-30B-A3B, 1 node × 8 GPUs, ppo_megatron_trainer, batch sizes that "
        "divide, vLLM rollout TP 1)",
    ),
    "megatron-lm": (
        megatron_lm_launch,
        "A Megatron-LM launch (torchrun pretrain_gpt.py, 1 node × 8 GPUs, a small MoE model as flags, "
        "--train-iters 1000 --lr 3e-4)",
    ),
    "slime": (slime_launch, "A slime launch (1 node × 8 GPUs, 8 rollout GPUs, a small MoE model as flags)"),
}
OPTIONS = ("model", "nodes", "gpus", "before", "config", "batch", "schedule")


@dataclass(frozen=True)
class Expected:
    line: int | None
    message: str
    fix: str | None


INFERRED = "inferred"  # a case's verl_version: no version given, so it is inferred from the keys


@dataclass(frozen=True)
class Case:
    """One side (bad or good) of a rule's cases."""

    rule: str
    side: str  # "bad" | "good"
    launch: str  # a LAUNCHES name, "script" (``script`` as written), "sizes" or "missing" (no file)
    args: str = ""
    options: dict = field(default_factory=dict)
    script: str | None = None
    sizes: dict | None = None
    env: dict | None = None
    device: str | None = None
    host_memory: int | None = None
    model_config: dict | None = None  # a config.json written to a model folder the launch names
    # --verl-version (a case for an entry point an older verl has); INFERRED: none given, the version inferred
    verl_version: str | None = None
    megatron_core_version: str | None = None  # --megatron-core-version (a check a newer Megatron-LM makes)
    fault: str | None = None  # a rule whose check raises while the case runs (``faulted``): INTERNAL-ERROR's case
    expect: tuple[Expected, ...] = ()

    def text(self, model_dir: Path | None = None) -> str | None:
        """The script the case runs (None for sizes or a missing file)."""
        if self.launch == "script":
            return self.script
        if self.launch in ("sizes", "missing"):
            return None
        options = dict(self.options)
        if model_dir is not None:
            options["model"] = str(model_dir)
        return LAUNCHES[self.launch][0](self.args, **options)

    def job(self):
        """The Job of a sizes case (Megatron-Core's initialize_model_parallel sizes)."""
        from shardcheck.frameworks.megatron.direct import job_from_sizes

        return job_from_sizes(**self.sizes)

    def shown(self) -> str:
        """The case as the rule's documentation shows it (Markdown)."""
        if self.launch == "sizes":
            sizes = ", ".join(f"{k} {v}" for k, v in self.sizes.items())
            head = f"Megatron-Core sizes (no script): {sizes}"
        elif self.launch == "missing":
            head = "A path that names no file"
        elif self.launch == "script":
            head = f"The script\n\n```bash\n{self.script.rstrip()}\n```"
        else:
            options = {k: v for k, v in self.options.items() if k in OPTIONS}
            said = LAUNCHES[self.launch][1]
            if options:
                said += " with " + ", ".join(f"{k} {_short(v)}" for k, v in options.items())
            if self.model_config is not None:
                said += f", its model a config.json with {json.dumps(_brief(self.model_config))}"
            head = said + (f", adding\n\n```\n{self.args}\n```" if self.args else "")
        extra = []
        if self.env:
            extra.append("with " + " ".join(f"`--env {k}={v}`" for k, v in self.env.items()))
        if self.device:
            extra.append(f"`--device {self.device}`")
        if self.host_memory:
            extra.append(f"`--host-memory {self.host_memory}`")
        if self.verl_version == INFERRED:
            extra.append("no `--verl-version`: the version inferred")
        elif self.verl_version:
            extra.append(f"`--verl-version {self.verl_version}`")
        if self.megatron_core_version:
            extra.append(f"`--megatron-core-version {self.megatron_core_version}`")
        if self.fault:
            extra.append(f"rule {self.fault} failing with a simulated bug")
        if extra:
            head += "\n\n(" + ", ".join(extra) + ")"
        if self.side == "good":
            return head + "\n\nreports nothing for this rule."
        found = "\n".join(
            f"{'line ' + str(e.line) if e.line else '(no line)'}: {e.message}"
            + (f"\n    fix: {e.fix}" if e.fix else "")
            for e in self.expect
        )
        return head + f"\n\nreports\n\n```\n{found}\n```"


def _simulated_bug(job) -> list:
    raise RuntimeError("a simulated bug")


@contextmanager
def faulted(rule_id: str | None) -> Iterator[None]:
    """While the block runs, rule ``rule_id``'s check raises (a simulated bug; None: no fault)."""
    if rule_id is None:
        yield
        return
    from shardcheck.rules.registry import all_rules

    rules = all_rules()
    original = rules[rule_id]
    rules[rule_id] = replace(original, check=_simulated_bug)
    try:
        yield
    finally:
        rules[rule_id] = original


def _short(value) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _brief(config: dict) -> dict:
    return {k: v for k, v in config.items() if not k.startswith("_")}


def _case(rule: str, side: str, data: dict) -> Case:
    data = dict(data)
    expect = tuple(Expected(e.get("line"), e["message"], e.get("fix")) for e in data.pop("expect", ()) or ())
    options = {k: data.pop(k) for k in OPTIONS if k in data}
    return Case(rule=rule, side=side, options=options, expect=expect, **data)


@cache
def rule_cases() -> dict[str, tuple[Case, Case]]:
    """Every rule's (bad, good) cases, by rule id, from ``rules/cases/*.yml``."""
    import yaml

    out = {}
    for path in sorted(CASES_DIR.glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        out[doc["rule"]] = (_case(doc["rule"], "bad", doc["bad"]), _case(doc["rule"], "good", doc["good"]))
    return out
