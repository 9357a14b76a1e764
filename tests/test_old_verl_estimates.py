"""The memory and step-time estimates on every bundled verl release: a key an older release lacks takes the
meaning that release gives it (resolve.py ABSENT_DEFAULTS, each with its source), never "unknown" for a key the
script could not have set; a rollout that cannot run is said so, and the JSON stays JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from shardcheck.api import check, memory
from shardcheck.estimate.step_time import predict
from shardcheck.frameworks.verl.versions import catalogue

EXAMPLE = Path(__file__).resolve().parents[1] / "src" / "shardcheck" / "examples" / "qwen3_235b_256k.sh"

FSDP = """#!/bin/bash
python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=64 \\
    data.max_prompt_length=1024 data.max_response_length=2048 \\
    actor_rollout_ref.model.path=/models/Qwen3-8B \\
    actor_rollout_ref.actor.ppo_mini_batch_size=16 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 \\
    actor_rollout_ref.actor.use_kl_loss=True \\
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4 \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 \\
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=4 \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=2 {extra} \\
    trainer.nnodes=1 trainer.n_gpus_per_node=8
"""


@pytest.mark.parametrize("version", catalogue().versions)
def test_estimates_need_no_key_the_release_lacks(version):
    """The 256K example (Megatron) on every release: the step time is predicted, or not for a reason other than a
    key missing from that release's config."""
    result = check(EXAMPLE, verl_version=version)
    assert result.job is not None and result.job.framework_version == version
    step, why = predict(result.job)
    assert step is not None or f"not in verl {version}'s config" not in (why or ""), why


def test_absent_keys_take_the_release_meaning():
    job = check(EXAMPLE, verl_version="0.4.0").job
    entropy = job.value("actor_rollout_ref.actor.calculate_entropy")
    assert entropy.value is False and "entropy_coeff" in entropy.origin.text
    assert job.value("actor_rollout_ref.actor.optim.optimizer").value == "adam"
    assert job.value("actor_rollout_ref.actor.megatron.dtype").value == "bfloat16"
    # the release that has the key reads it from its own config
    newer = check(EXAMPLE, verl_version="0.7.0").job.value("actor_rollout_ref.actor.calculate_entropy")
    assert newer.value is False and "entropy_coeff" not in newer.origin.text


def test_endless_rollout_is_said_and_json_has_no_infinity(tmp_path):
    """verl 0.5.0 has no rollout DP / EP keys: the example's rollout is 64 engines of TP 4, whose weights do not fit
    an Ascend-910B; the step never ends, and the reports say so (JSON has no Infinity)."""
    result = check(EXAMPLE, verl_version="0.5.0")
    step, _ = predict(result.job)
    assert step is not None and step.total == float("inf")
    run = subprocess.run(
        [sys.executable, "-m", "shardcheck", "check", "--verl-version", "0.5.0", str(EXAMPLE)],
        capture_output=True,
        text=True,
    )
    assert "no finite step: rollout cannot run" in run.stdout
    for command in ("check", "memory"):
        run = subprocess.run(
            [sys.executable, "-m", "shardcheck", command, "--format", "json", "--verl-version", "0.5.0", str(EXAMPLE)],
            capture_output=True,
            text=True,
        )

        def refuse(constant):
            raise AssertionError(f"{command} --format json wrote {constant}")

        json.loads(run.stdout, parse_constant=refuse)
    # a release whose rollout fits is timed
    fits, _ = predict(check(EXAMPLE, verl_version="0.9.1").job)
    assert fits is not None and fits.total < float("inf")


def test_memory_takes_the_version_options():
    assert memory(EXAMPLE, verl_version="0.6.0").version == "verl 0.6.0 as given by --verl-version"
    assert memory(EXAMPLE, verl_version="0.9.1").version == "verl 0.9.1 as given by --verl-version"
    run = subprocess.run(
        [sys.executable, "-m", "shardcheck", "memory", "--verl-version", "0.2", str(EXAMPLE)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1 and "bundled" in run.stderr


@pytest.mark.parametrize(("version", "size", "roles"), [("0.5.0", 3, ["actor"]), ("0.9.1", 3, ["actor"])])
def test_fsdp_ref_on_the_actor_mesh(tmp_path, version, size, roles):
    """verl 0.4.0 … 0.5.0 build the ref on the actor's mesh (its fsdp_config has no fsdp_size): the ref's size is
    the actor's, and a bad size is one finding, on the actor's key."""
    path = tmp_path / "run.sh"
    path.write_text(FSDP.format(extra=f"actor_rollout_ref.actor.fsdp_config.fsdp_size={size}"))
    result = check(path, verl_version=version)
    ref = next(lay for lay in result.job.fsdp_layouts if lay.role == "ref")
    if version == "0.5.0":
        assert ref.size_key == "actor_rollout_ref.actor.fsdp_config.fsdp_size" and ref.fsdp_size.value == size
    else:
        assert ref.size_key == "actor_rollout_ref.ref.fsdp_config.fsdp_size" and ref.fsdp_size.value == -1
    found = [f for f in result.findings if f.rule == "VERL-FSDP-SIZE"]
    assert [f.role for f in found] == roles
    assert found[0].fix.startswith("actor_rollout_ref.actor.fsdp_config.fsdp_size=-1")


def test_fsdp_ref_own_size_fires_on_its_key(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text(FSDP.format(extra="actor_rollout_ref.ref.fsdp_config.fsdp_size=3"))
    found = [f for f in check(path, verl_version="0.9.1").findings if f.rule == "VERL-FSDP-SIZE"]
    assert [f.role for f in found] == ["ref"]
    assert found[0].fix.startswith("actor_rollout_ref.ref.fsdp_config.fsdp_size=-1")
    silent = tmp_path / "ok.sh"
    silent.write_text(FSDP.format(extra=""))
    assert not [f for f in check(silent, verl_version="0.5.0").findings if f.rule == "VERL-FSDP-SIZE"]


def test_plan_takes_the_version_options():
    """plan judges and proves every layout against the version given, as check does; plan --model refuses them."""
    from shardcheck.plan import plan_script

    result = plan_script(EXAMPLE, device="910c", top=1, verl_version="0.7.0")
    assert result.job.framework_version == "0.7.0" and result.job.version_source == "flag"
    assert result.proven and result.plans and all(p.job.framework_version == "0.7.0" for p in result.plans)
    run = subprocess.run(
        [sys.executable, "-m", "shardcheck", "plan", "--model", "Qwen3-8B", "--world", "8", "--devices-per-node", "8"]
        + ["--device", "h100", "--seq-len", "4096", "--verl-version", "0.7.0"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "version options" in run.stderr


GAE = """#!/bin/bash
python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer algorithm.adv_estimator=gae \\
    data.train_batch_size=64 data.max_prompt_length=1024 data.max_response_length=3072 \\
    actor_rollout_ref.model.path=/models/Qwen3-8B critic.model.path=/models/Qwen3-8B \\
    actor_rollout_ref.actor.ppo_mini_batch_size=64 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 \\
    critic.ppo_micro_batch_size_per_gpu=2 critic.ppo_max_token_len_per_gpu=20000 {extra} \\
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 critic.megatron.tensor_model_parallel_size=2 \\
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.tensor_model_parallel_size=2 \\
    trainer.nnodes=1 trainer.n_gpus_per_node=8 trainer.device=cuda
"""


@pytest.mark.parametrize(
    ("version", "extra", "tokens"),
    [
        ("0.7.1", "", 2 * 4096),  # the legacy critic worker packs only with use_dynamic_bsz: micro × sequence
        ("0.7.1", "critic.use_dynamic_bsz=True", 20000),  # its update budget
        ("0.8.0", "", 20000),  # the engine worker always packs; the classic trainer's update budget
        ("0.9.1", "", 32768),  # the v1 trainer gives both passes ppo_infer_max_token_len_per_gpu (default 32768)
        ("0.9.1", "trainer.use_v1=False", 20000),
    ],
)
def test_critic_micro_batch_follows_the_version(tmp_path, version, extra, tokens):
    """The critic's update micro batch in the memory estimate is the one the batch rules judge (critic_packing)."""
    from shardcheck.frameworks.verl.memory_settings import critic_settings

    path = tmp_path / "run.sh"
    path.write_text(GAE.format(extra=extra))
    job = check(path, verl_version=version).job
    assert critic_settings(job).tokens_per_micro_batch == tokens
