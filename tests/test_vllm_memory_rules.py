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


def test_startup_master_under_megatrons_optimizer_cpu_offload(tmp_path):
    """HybridDeviceOptimizer keeps the fp32 master shards on the device (only Adam's moments go to the host);
    with the precision-aware optimizer the offloaded share's fp32 copy is made on the host."""
    gmu = "actor_rollout_ref.rollout.gpu_memory_utilization=0.5 "
    offload = (
        "+actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_cpu_offload=True "
        "+actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_offload_fraction=1.0 "
    )
    plain = job_estimate(_result(tmp_path, MOE + gmu).job)
    moved = job_estimate(_result(tmp_path, MOE + gmu + offload).job)
    full = max(plain.train.stages, key=lambda s: s.total).bytes["optimizer"]
    kept = max(moved.train.stages, key=lambda s: s.total).bytes
    assert abs(kept["optimizer"] - full // 3) <= 2  # the fp32 master: 4 of 12 bytes per parameter
    assert moved.rollout.startup_resident_bytes == plain.rollout.startup_resident_bytes
    aware = MOE.replace("use_precision_aware_optimizer=False", "use_precision_aware_optimizer=True")
    aware_est = job_estimate(_result(tmp_path, aware + gmu + offload).job)
    b = max(aware_est.train.stages, key=lambda s: s.total).bytes
    assert b["optimizer"] == 0
    assert aware_est.rollout.startup_resident_bytes == b["weights"] + b["grads"]


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


def test_lora_trains_only_its_adapters(tmp_path):
    """A LoRA actor's frozen base has no gradients and no optimizer state (memory/params.py lora_params): far
    less stays on the device at vLLM's start than for full training, so the same utilisation starts."""
    words = MOE + "actor_rollout_ref.rollout.gpu_memory_utilization=0.7 actor_rollout_ref.actor.use_kl_loss=True"
    full = _result(tmp_path, words)
    lora = _result(tmp_path, words + " actor_rollout_ref.model.lora.rank=64")
    assert "VLLM-MEM-STARTUP" in _rules(full) and "VLLM-MEM-STARTUP" not in _rules(lora)
    base = max(job_estimate(full.job).train.stages, key=lambda s: s.total).bytes
    tuned = max(job_estimate(lora.job).train.stages, key=lambda s: s.total).bytes
    assert tuned["weights"] > base["weights"]  # the base and the adapters
    assert 0 < tuned["grads"] < base["grads"] / 20 and 0 < tuned["optimizer"] < base["optimizer"] / 20
    assert full.job.layout("ref") is not None and lora.job.layout("ref") is None  # the ref: the actor, no adapters
    assert lora.job.ref_used.value and lora.job.ref_in_actor.value


def test_lora_rank_unknown_to_the_megatron_engine_is_not_sized(tmp_path):
    """model.lora_rank (peft's key) with the Megatron engine: the ref is the actor (verl reads either key) but the
    engine builds Megatron-Bridge's LoRA from model.lora.rank only; the estimate says unknown, no rule guesses."""
    words = MOE + "actor_rollout_ref.rollout.gpu_memory_utilization=0.9 actor_rollout_ref.model.lora_rank=64"
    r = _result(tmp_path, words)
    assert not _rules(r) & {"VLLM-MEM-STARTUP", "VLLM-MEM-WAKE", "MEM-TRAIN-OOM"}
    assert any("LoRA rank" in p for p in job_estimate(r.job).problems)


def test_fsdp_holds_only_its_sharded_parameters_at_start(tmp_path):
    words = "actor_rollout_ref.rollout.gpu_memory_utilization=0.5"
    r = _result(tmp_path, words, model="Qwen3-8B", config="--config-name=ppo_trainer")
    est = job_estimate(r.job)
    assert est.rollout.startup_resident_bytes == est.train.stages[0].bytes["weights"] + sum(
        s.critic_at_startup for s in est.train.stages[:1]
    )


def test_vllm_0_8_5_has_no_startup_check(tmp_path):
    """vLLM 0.8.5's worker only records the free memory at init (v1/worker/gpu_worker.py init_device); 0.9.1 on
    refuse to start below gpu_memory_utilization × total."""
    path = tmp_path / "run.sh"
    path.write_text(verl_launch(MOE + "actor_rollout_ref.rollout.gpu_memory_utilization=0.9"))
    assert "VLLM-MEM-STARTUP" in _rules(check(path, device="h100", vllm_version="0.9.1"))
    assert "VLLM-MEM-STARTUP" not in _rules(check(path, device="h100", vllm_version="0.8.5"))
