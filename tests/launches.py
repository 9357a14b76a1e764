"""Launch scripts and model facts several test modules build on."""

from __future__ import annotations

# A verl GRPO launch of Qwen3-30B-A3B on one node of 8 GPUs, Megatron actor (TP, EP) and vLLM rollout (TP).
_VERL_QWEN3_MOE = """#!/bin/bash
python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer \\
    algorithm.adv_estimator=grpo data.train_batch_size=8 \\
    data.max_prompt_length=1024 data.max_response_length=3072 \\
    actor_rollout_ref.model.path=/models/Qwen3-30B-A3B \\
    actor_rollout_ref.actor.ppo_mini_batch_size=8 actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \\
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1 \\
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 \\
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size={tp} \\
    actor_rollout_ref.actor.megatron.expert_model_parallel_size={ep} \\
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n=2 \\
    actor_rollout_ref.rollout.tensor_model_parallel_size={rtp} \\
    trainer.nnodes=1 trainer.n_gpus_per_node=8 trainer.device=cuda
"""


def verl_qwen3_moe(*, tp: int = 2, ep: int = 4, rtp: int = 2) -> str:
    """The launch with the actor's TP / EP and the rollout's TP given."""
    return _VERL_QWEN3_MOE.format(tp=tp, ep=ep, rtp=rtp)


def length_facts(model_type: str, max_position_embeddings: int, rope, model_max_length, **more):
    """Model facts holding only what vLLM's max-length check reads (one layer, one head): the vLLM max-length
    rule tests build them from a config (``more``: e.g. the whole ``config``)."""
    from shardcheck.job import ModelFacts
    from shardcheck.origin import Origin

    return ModelFacts(
        name="m",
        source="test",
        origin=Origin(kind="model"),
        num_hidden_layers=1,
        num_attention_heads=1,
        num_key_value_heads=1,
        model_type=model_type,
        max_position_embeddings=max_position_embeddings,
        rope_scaling=rope,
        model_max_length=model_max_length,
        **more,
    )


# The config.json of a small dense model: the fields shardcheck reads, each in range.
SMALL_MODEL_CONFIG = {
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "num_hidden_layers": 4,
    "hidden_size": 1024,
    "intermediate_size": 2048,
    "vocab_size": 1000,
    "max_position_embeddings": 4096,
}
