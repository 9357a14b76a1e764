"""vLLM engine checks a verl rollout reaches at start-up (vllm/config/model.py, model_executor/layers/linear.py)."""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.job import Job
from shardcheck.rules.megatron_parallel_state import where
from shardcheck.rules.registry import Finding, finding, need, rule

RO = "actor_rollout_ref.rollout"


def _vllm_tp(job: Job) -> int | None:
    if job.framework != "verl" or job.rollout is None:
        return None
    if need(job.value(f"{RO}.name"), f"{RO}.name") != "vllm":
        return None
    return need(job.rollout.tp, f"{RO}.tensor_model_parallel_size")


@rule("VLLM-TP-HEADS", "error", "Rollout TP must divide the attention heads (vLLM)", needs_model=True)
def vllm_heads(job: Job) -> Iterator[Finding]:
    """
    vLLM shards attention heads over its tensor-parallel ranks.

    Why:
    `ModelConfig.verify_with_parallel_config` raises `ValueError: Total number of attention heads (H)
    must be divisible by tensor parallel size (T).` when the rollout server starts.

    Bad:
    `actor_rollout_ref.rollout.tensor_model_parallel_size=3` for a 32-head model.

    Good:
    TP 1, 2, 4, 8, 16 or 32.

    Fix:
    Choose a rollout TP that divides the head count.

    Source:
    vllm/config/model.py ModelConfig.verify_with_parallel_config (vLLM 0.2x-0.33).
    """
    tp = _vllm_tp(job)
    heads = job.model.num_attention_heads
    if tp and heads and heads % tp:
        yield finding("VLLM-TP-HEADS", f"Total number of attention heads ({heads}) must be divisible by tensor parallel "
                                       f"size ({tp}). (vLLM, {job.model.name})", where(job.rollout.tp),
                      fix=f"{RO}.tensor_model_parallel_size in "
                          f"{', '.join(str(d) for d in range(1, heads + 1) if heads % d == 0)}")


@rule("VLLM-TP-KV", "error", "Rollout TP and the KV heads must divide one another (vLLM)", needs_model=True)
def vllm_kv_heads(job: Job) -> Iterator[Finding]:
    """
    vLLM splits the KV heads over TP ranks when there are at least as many as ranks, and replicates
    them (TP / KV copies) when there are fewer; either way one must divide the other. Latent
    attention (MLA) has no KV heads to split.

    Why:
    `QKVParallelLinear.__init__` fails `ensure_divisibility` with `AssertionError: T is not
    divisible by K` while the rollout model is loaded.

    Bad:
    8 KV heads with rollout TP 12.

    Good:
    TP 1, 2, 4, 8, 16, ...

    Fix:
    Choose a rollout TP that divides the KV heads or is a multiple of them.

    Source:
    vllm/model_executor/layers/linear.py QKVParallelLinear.__init__ (vLLM 0.2x-0.33).
    """
    tp = _vllm_tp(job)
    kv = job.model.num_key_value_heads
    if not tp or not kv or job.model.mla:
        return
    if tp >= kv and tp % kv:
        message = f"{tp} is not divisible by {kv}"
    elif tp < kv and kv % tp:
        message = f"{kv} is not divisible by {tp}"
    else:
        return
    yield finding("VLLM-TP-KV", f"{job.model.name} has {kv} KV heads and rollout TP is {tp} (vLLM: \"{message}\")",
                  where(job.rollout.tp), fix=f"a rollout TP dividing {kv} or a multiple of it")
