"""LoRA actors: only the adapters are trained (memory/params.py lora_params), and verl builds no ref engine when
the ref is the actor without its adapters (frameworks/verl/resolve.py REF_IN_ACTOR_KEYS)."""

from __future__ import annotations

import pytest

from shardcheck.api import check
from shardcheck.memory.params import Sharding, lora_params
from shardcheck.models.architecture import architecture
from shardcheck.models.facts import load_model
from shardcheck.rules.examples import verl_launch
from shardcheck.rules.memory import job_estimate

# Qwen3-8B (presets.json): hidden 4096, 32 heads and 8 KV heads of 128, FFN 12288, 36 layers.
H, Q, KV, FFN, LAYERS = 4096, 32 * 128, 8 * 128, 12288, 36


def _arch(name: str):
    model, problem = load_model(f"/models/{name}", False)
    assert problem is None
    return architecture(model)


def test_peft_all_linear_on_a_dense_model():
    """peft adds A (r × in) and B (out × r) to every nn.Linear but lm_head: q, k, v, o, gate, up, down."""
    r = 64
    per_layer = sum(r * (i + o) for i, o in [(H, Q), (H, KV), (H, KV), (Q, H), (H, FFN), (H, FFN), (FFN, H)])
    modules = frozenset({"q", "k", "v", "o", "gate", "up", "down", "router"})
    got = lora_params(_arch("Qwen3-8B"), tuple(range(LAYERS)), Sharding(1, 1, 1, 1), r, modules, fused=False)
    assert got.total == got.dense == LAYERS * per_layer
    only_q_v = lora_params(_arch("Qwen3-8B"), (0,), Sharding(1, 1, 1, 1), r, frozenset({"q", "v"}), fused=False)
    assert only_q_v.total == r * (H + Q) + r * (H + KV)


def test_megatron_fused_modules_split_over_tp():
    """Megatron-Bridge: one adapter on linear_qkv and on linear_fc1 (gated: 2·FFN wide); the split side of
    each adapter is divided over TP (B of column-parallel qkv/fc1, A of row-parallel proj/fc2)."""
    r, tp = 16, 4
    modules = frozenset({"q", "k", "v", "o", "gate", "up", "down"})
    per_layer = r * (H + (Q + 2 * KV) // tp) + r * (Q // tp + H) + r * (H + 2 * FFN // tp) + r * (FFN // tp + H)
    got = lora_params(_arch("Qwen3-8B"), (0, 1), Sharding(tp, 1, 1, 1), r, modules, fused=True)
    assert got.total == 2 * per_layer


def test_megatron_expert_adapters_are_shared_by_the_local_experts():
    """A grouped expert linear gets one adapter for all local experts (share_expert_adapters, the default):
    the expert adapters do not grow with the expert count per rank."""
    arch = _arch("Qwen3-30B-A3B")
    modules = frozenset({"gate", "up", "down"})
    ep1 = lora_params(arch, (0,), Sharding(1, 1, 1, 1), 8, modules, fused=True)
    ep8 = lora_params(arch, (0,), Sharding(1, 8, 1, 1), 8, modules, fused=True)
    assert ep1.expert == ep8.expert == 8 * (arch.hidden + 2 * arch.moe_ffn) + 8 * (arch.moe_ffn + arch.hidden)


def test_unsized_cases_are_unknown():
    from shardcheck.origin import UnknownValue

    with pytest.raises(UnknownValue, match="FSDP"):
        lora_params(_arch("Qwen3-30B-A3B"), (0,), Sharding(1, 1, 1, 1), 8, frozenset({"down"}), fused=False)
    with pytest.raises(UnknownValue, match="MLA"):
        lora_params(_arch("DeepSeek-V3"), (0,), Sharding(1, 1, 1, 1), 8, frozenset({"q"}), fused=True)


def _job(tmp_path, words: str, **options):
    path = tmp_path / "run.sh"
    path.write_text(verl_launch(words, **options))
    return check(path, device="h100").job


def test_fsdp_lora_trains_the_adapters_only(tmp_path):
    fsdp = {"model": "Qwen3-8B", "config": "--config-name=ppo_trainer"}
    full = job_estimate(_job(tmp_path, "", **fsdp)).train.stages[0].bytes
    lora = job_estimate(_job(tmp_path, "actor_rollout_ref.model.lora_rank=64", **fsdp)).train.stages[0].bytes
    adapters = LAYERS * sum(64 * (i + o) for i, o in [(H, Q), (H, KV), (H, KV), (Q, H), (H, FFN), (H, FFN), (FFN, H)])
    shard = 8  # fsdp_size -1: the world
    assert lora["grads"] == -(-adapters // shard) * 4  # fp32 (model_dtype)
    assert lora["optimizer"] == -(-adapters // shard) * 8  # AdamW's two fp32 moments
    assert lora["weights"] > full["weights"] and lora["grads"] < full["grads"] / 20
    unknown = job_estimate(_job(tmp_path, "actor_rollout_ref.model.target_modules=[q_proj,my_head]", **fsdp))
    assert unknown.train is not None  # no LoRA: the target list alone does nothing
    partial = job_estimate(
        _job(
            tmp_path,
            "actor_rollout_ref.model.lora_rank=8 actor_rollout_ref.model.target_modules=[q_proj,my_head]",
            **fsdp,
        )
    )
    assert partial.train is None and any("my_head" in p for p in partial.problems)


@pytest.mark.parametrize(
    ("version", "words", "ref_engine"),
    [
        ("0.9.1", "actor_rollout_ref.model.lora.rank=8", False),
        ("0.9.1", "actor_rollout_ref.model.lora_adapter_path=/a", False),
        ("0.9.1", "", True),
        ("0.7.0", "actor_rollout_ref.model.lora_adapter_path=/a", False),
        # 0.7.0's trainer reads model.lora_rank and lora_adapter_path only: a Megatron LoRA rank keeps the ref
        ("0.7.0", "actor_rollout_ref.model.lora.rank=8", True),
    ],
)
def test_ref_engine_is_not_built_when_the_ref_is_the_actor(tmp_path, version, words, ref_engine):
    words = "actor_rollout_ref.actor.use_kl_loss=True " + words
    path = tmp_path / "run.sh"
    path.write_text(verl_launch(words))
    job = check(path, device="h100", verl_version=version).job
    assert job.framework_version == version
    assert (job.layout("ref") is not None) == ref_engine
    assert job.ref_used.value  # the ref's log-probs are computed either way


MEGATRON_LORA = """#!/bin/bash
python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer algorithm.adv_estimator=grpo \\
    data.train_batch_size=64 data.max_prompt_length=1024 data.max_response_length=3072 \\
    actor_rollout_ref.model.path=/models/Qwen3-8B \\
    actor_rollout_ref.actor.ppo_mini_batch_size=64 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \\
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1 \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 \\
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 \\
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=4 \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=2 {lora} \\
    trainer.nnodes=1 trainer.n_gpus_per_node=8 trainer.device=cuda
"""


def test_lora_update_time_has_no_base_weight_gradients(tmp_path):
    """Megatron-Bridge LoRA: the frozen base's GEMMs run forward and dgrad only (2 of the 3 passes), only the
    adapters' gradients cross DP and reach the optimizer, and the model FLOPs say the same."""
    from shardcheck.estimate.step_time import forward_flops_per_token, predict, update_flops_per_token
    from shardcheck.models.architecture import architecture

    full, lora = tmp_path / "full.sh", tmp_path / "lora.sh"
    full.write_text(MEGATRON_LORA.format(lora=""))
    lora.write_text(
        MEGATRON_LORA.format(
            lora="actor_rollout_ref.model.lora.rank=32 'actor_rollout_ref.model.lora.target_modules=[linear_qkv,"
            "linear_proj,linear_fc1,linear_fc2]'"
        )
    )
    jobs = {name: check(path, verl_version="0.9.1").job for name, path in (("full", full), ("lora", lora))}
    assert jobs["lora"].ref_in_actor.value is True
    steps = {name: predict(job)[0] for name, job in jobs.items()}
    assert all(steps.values()), {name: predict(job)[1] for name, job in jobs.items()}
    full_s, lora_s = steps["full"], steps["lora"]
    # the base's weight gradients were a third of its GEMM time: the update is faster, but not by more than that
    assert 0.6 * full_s.phases["update"] < lora_s.phases["update"] < 0.9 * full_s.phases["update"]
    assert lora_s.terms["optimizer"] < full_s.terms["optimizer"] / 50  # adapters only
    assert lora_s.terms["dp"] <= full_s.terms["dp"]
    # the forward-only phases are the same forward
    assert lora_s.phases["old_log_prob"] == pytest.approx(full_s.phases["old_log_prob"], rel=0.02)
    arch = architecture(jobs["full"].model)
    forward = forward_flops_per_token(arch, 1024)
    assert update_flops_per_token(arch, 1024) == 3 * forward
    assert 2 * forward < update_flops_per_token(arch, 1024, lora=True) < 2.1 * forward
    assert lora_s.train_flops == pytest.approx(
        full_s.train_flops * update_flops_per_token(arch, 2048, True) / (3 * forward_flops_per_token(arch, 2048))
    )
