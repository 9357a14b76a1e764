"""``shardcheck plan``: the layouts that start, fit and run fastest, as the overrides that make them.

``plan_script`` keeps a script's model, cluster, batch and sequence settings and searches its layouts;
``plan_model`` writes a minimal launch for a model and cluster and plans that. Each printed plan is proven
before it is shown: the script is read again with the plan's override lines added to its launch command,
resolved by the framework's own resolution, and judged by every rule ``check`` runs (``prove``).
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from shardcheck.errors import InputError
from shardcheck.plan.search import DEFAULT_MARGIN, PlanError, PlanResult, plan_job

__all__ = ["DEFAULT_MARGIN", "PlanError", "PlanResult", "plan_model", "plan_script", "prove"]


@dataclass(frozen=True)
class ScriptInput:
    path: str
    env: dict[str, str] | None
    model_config: str | None
    display: str
    allow_source: tuple = ()  # directories `source` may read besides the script's own tree
    versions: dict = field(default_factory=dict)  # api.version_options: the versions to resolve against
    memo: dict = field(default_factory=dict, compare=False)  # api.resolve_script's: the script read once


def plan_script(
    path: str | Path,
    env: dict[str, str] | None = None,
    *,
    model_config: str | None = None,
    device: str | None = None,
    top: int = 5,
    margin: float = DEFAULT_MARGIN,
    display: str | None = None,
    proof: bool = True,
    allow_source: tuple = (),
    **versions: str | None,
) -> PlanResult:
    """Plan the job of the launch script at ``path`` (InputError for a script that cannot be read). ``versions``:
    ``check``'s ``verl_version``, ``verl_path``, ``megatron_core_version``, ``vllm_version``, ``sglang_version``
    (else the settings', else chosen as ``check`` chooses)."""
    from shardcheck.api import resolve_script, version_options
    from shardcheck.settings import load_settings, script_folder

    shown = display or str(path)
    options = version_options(load_settings(script_folder(path)), **versions)
    memo: dict = {}
    job = resolve_script(
        path, env, model_config=model_config, display=shown, allow_source=allow_source, memo=memo, **options
    )
    if device is not None:
        from shardcheck.memory.devices import find_device

        find_device(device)
    result = plan_job(job, device=device, top=top, margin=margin)
    if proof:
        prove(result, ScriptInput(str(path), env, model_config, shown, allow_source, options, memo))
    return result


def prove(result: PlanResult, source: ScriptInput) -> None:
    """Re-read the script with each plan's override lines, resolve it with the framework's own code, judge
    it with every rule, and compare the layout with the planner's: a plan that differs is dropped (and the
    result says so), so what is printed is what ``check`` says of the pasted lines."""
    from dataclasses import replace

    from shardcheck.api import resolve_script
    from shardcheck.plan.search import errors_of, knob_view
    from shardcheck.rules.registry import run_rules

    kept = []
    for plan in result.plans:
        job = resolve_script(
            source.path,
            source.env,
            model_config=source.model_config,
            display=source.display,
            extra_args=tuple(w for line in plan.lines for w in line.split()),
            drop_args=tuple((flag, value) for flag, value, _ in plan.removed),
            allow_source=source.allow_source,
            # the script's reading is shared; the launch's parsed overrides are not (the plan's lines change them)
            memo={"reading": source.memo["reading"]} if "reading" in source.memo else None,
            **source.versions,
        )
        job = replace(job, device_choice=result.device.name)
        errors = errors_of(run_rules(job)[0])
        if errors or knob_view(job) != knob_view(plan.job):
            result.counts["disproved"] = result.counts.get("disproved", 0) + 1
            continue
        kept.append(plan)
    for i, plan in enumerate(kept, 1):
        plan.rank = i
    result.plans = kept
    result.proven = True


SEQ_PROMPT = 1024  # the prompt share of --seq-len for an RL plan (the rest is the response)


def plan_model(
    model: str,
    *,
    world: int,
    devices_per_node: int,
    device: str,
    seq_len: int,
    global_batch: int = 64,
    framework: str = "verl",
    top: int = 5,
    margin: float = DEFAULT_MARGIN,
    proof: bool = True,
) -> PlanResult:
    """Plan a GRPO-style verl job for ``model`` (a preset name or a config.json) on ``world`` devices."""
    if framework != "verl":
        raise InputError(
            f"--framework {framework}: plan --model writes verl launches; for Megatron-LM or slime "
            "plan a launch script (shardcheck plan run.sh)"
        )
    if world < 1 or devices_per_node < 1 or world % devices_per_node:
        raise InputError(f"--world {world} must be a positive multiple of --devices-per-node {devices_per_node}")
    if seq_len < 2:
        raise InputError(f"--seq-len {seq_len} must be at least 2")
    from shardcheck.memory.devices import find_device

    dev = find_device(device)
    config = model if model.endswith(".json") else None
    name = "model" if config else model
    prompt = min(SEQ_PROMPT, seq_len // 2)
    text = "\n".join(
        [
            "#!/bin/bash",
            "# written by shardcheck plan --model",
            "python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer \\",
            "    algorithm.adv_estimator=grpo \\",
            f"    data.train_batch_size={global_batch} \\",
            f"    data.max_prompt_length={prompt} data.max_response_length={seq_len - prompt} \\",
            f"    actor_rollout_ref.model.path={name} \\",
            f"    actor_rollout_ref.actor.ppo_mini_batch_size={global_batch} \\",
            "    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \\",
            "    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1 \\",
            "    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 \\",
            "    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=1 \\",
            f"    actor_rollout_ref.rollout.max_model_len={seq_len} \\",
            f"    trainer.nnodes={world // devices_per_node} trainer.n_gpus_per_node={devices_per_node} \\",
            f"    trainer.device={dev.kind}",
            "",
        ]
    )
    fd, path = tempfile.mkstemp(suffix=".sh", prefix="shardcheck-plan-")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        shown = f"<plan --model {model}>"
        from shardcheck.api import resolve_script

        memo: dict = {}
        job = resolve_script(path, None, model_config=config, display=shown, memo=memo)
        result = plan_job(job, device=dev.name, top=top, margin=margin)
        if proof:
            prove(result, ScriptInput(path, None, config, shown, memo=memo))
        return result
    finally:
        os.unlink(path)
