"""VLLM-MEM-STARTUP and VLLM-MEM-WAKE beyond their case files: what the training side holds at vLLM's start
(memory/estimate.py _at_startup) and the settings that silence each rule."""

from __future__ import annotations

from shardcheck.api import check
from shardcheck.rules.examples import verl_launch
from shardcheck.rules.memory import job_estimate

MOE = (
    "actor_rollout_ref.actor.megatron.expert_model_parallel_size=8 "
    "actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=1 "
    "actor_rollout_ref.rollout.tensor_model_parallel_size=4 "
    "actor_rollout_ref.actor.optim.use_precision_aware_optimizer=False "
)


def _result(tmp_path, words: str, **options):
    path = tmp_path / "run.sh"
    path.write_text(verl_launch(words, **options))
    return check(path, device="h100")


def _rules(result) -> set[str]:
    return {f.rule for f in result.findings}


def test_startup_counts_the_master_copy_not_adams_moments(tmp_path):
    r = _result(tmp_path, MOE + "actor_rollout_ref.rollout.gpu_memory_utilization=0.5")
    ro = job_estimate(r.job).rollout
    stage = max(job_estimate(r.job).train.stages, key=lambda s: s.total).bytes
    master = stage["optimizer"] // 3  # Adam, fp32: 4 of 12 bytes per parameter
    assert ro.startup_resident_bytes == stage["weights"] + stage["grads"] + master
    assert ro.training_resident_bytes == stage["weights"] + stage["grads"] + stage["optimizer"]


def test_offload_at_init_frees_the_device(tmp_path):
    words = (
        MOE + "actor_rollout_ref.rollout.gpu_memory_utilization=0.9 actor_rollout_ref.actor.megatron.param_offload=True"
    )
    ro = job_estimate(_result(tmp_path, words).job).rollout
    assert 0 < ro.startup_resident_bytes  # the master copy stays without optimizer_offload
    words += " actor_rollout_ref.actor.megatron.optimizer_offload=True"
    r = _result(tmp_path, words)
    assert job_estimate(r.job).rollout.startup_resident_bytes == 0
    assert not _rules(r) & {"VLLM-MEM-STARTUP", "VLLM-MEM-WAKE"}


def test_wake_needs_free_cache_engine(tmp_path):
    words = MOE + "actor_rollout_ref.rollout.gpu_memory_utilization=0.45"
    assert "VLLM-MEM-WAKE" in _rules(_result(tmp_path, words))
    assert "VLLM-MEM-WAKE" not in _rules(
        _result(tmp_path, words + " actor_rollout_ref.rollout.free_cache_engine=False")
    )


def test_a_job_that_does_not_start_gets_the_startup_finding_only(tmp_path):
    rules = _rules(_result(tmp_path, MOE + "actor_rollout_ref.rollout.gpu_memory_utilization=0.9"))
    assert "VLLM-MEM-STARTUP" in rules and "VLLM-MEM-WAKE" not in rules


def test_lora_is_not_sized(tmp_path):
    words = MOE + "actor_rollout_ref.rollout.gpu_memory_utilization=0.9 actor_rollout_ref.model.lora_rank=64"
    assert not _rules(_result(tmp_path, words)) & {"VLLM-MEM-STARTUP", "VLLM-MEM-WAKE"}


def test_fsdp_holds_only_its_sharded_parameters_at_start(tmp_path):
    words = "actor_rollout_ref.rollout.gpu_memory_utilization=0.5"
    r = _result(tmp_path, words, model="Qwen3-8B", config="--config-name=ppo_trainer")
    est = job_estimate(r.job)
    assert est.rollout.startup_resident_bytes == est.train.stages[0].bytes["weights"] + sum(
        s.critic_at_startup for s in est.train.stages[:1]
    )
