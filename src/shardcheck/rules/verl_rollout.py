"""verl's rollout layout and placement (verl 0.9.1, hybrid engine: rollout ranks = trainer ranks)."""

from __future__ import annotations

from collections.abc import Iterator

from shardcheck.frameworks.verl.versions import (
    MNBT_RAISED_BY_VERL,
    ROLLOUT_PP_REFUSED,
    SYNC_ROLLOUT_REMOVED,
    TRTLLM_PP_REFUSED,
    at_least,
)
from shardcheck.job import Job
from shardcheck.rules.base import Finding, finding, need, rule, where

RO = "actor_rollout_ref.rollout"


def _rollout(job: Job):
    if job.rollout is None:
        return None
    r = job.rollout
    tp = need(r.tp, f"{RO}.tensor_model_parallel_size")
    dp = need(r.dp, f"{RO}.data_parallel_size")
    pp = need(r.pp, f"{RO}.pipeline_model_parallel_size")
    return tp, dp, pp


@rule("VERL-RO-PP", "error", "Rollout pipeline parallelism is not implemented", frameworks=("verl",))
def rollout_pp(job: Job) -> Iterator[Finding]:
    """
    verl's vLLM, SGLang and TensorRT-LLM rollouts do not support pipeline parallelism.

    Why:
    `RolloutConfig.__post_init__` raises `NotImplementedError: Current rollout self.name='vllm' not
    implemented pipeline_model_parallel_size > 1 yet.` when the workers build their config.

    Fix:
    Set `actor_rollout_ref.rollout.pipeline_model_parallel_size=1`.

    Versions:
    verl 0.6.0 and later refuse vllm and sglang, 0.7.1 and later trtllm too. verl 0.4.0 … 0.5.0 have no
    rollout pipeline size: a key added with `+` is ignored (their vLLM rollout never passes one to vLLM), so
    vLLM's own refusal for models without `SupportsPP` (vllm/config/model.py) is not reached either.

    Source:
    verl/workers/config/rollout.py RolloutConfig.__post_init__ (verl 0.6.0 … 0.9.1).
    """
    if not at_least(job.framework_version, ROLLOUT_PP_REFUSED):
        return
    sizes = _rollout(job)
    if sizes is None:
        return
    name = need(job.value(f"{RO}.name"), f"{RO}.name")
    refused = ("vllm", "sglang", "trtllm") if at_least(job.framework_version, TRTLLM_PP_REFUSED) else ("vllm", "sglang")
    if sizes[2] > 1 and name in refused:
        yield finding(
            "VERL-RO-PP",
            f"Current rollout self.name='{name}' not implemented pipeline_model_parallel_size > 1 "
            "yet. (verl RolloutConfig)",
            where(job.rollout.pp),
            fix=f"{RO}.pipeline_model_parallel_size=1",
        )


@rule("VERL-RO-EP", "error", "Rollout expert parallel size must be rollout TP · DP", frameworks=("verl",))
def rollout_ep(job: Job) -> Iterator[Finding]:
    """
    For every rollout backend but TensorRT-LLM, an expert parallel size above 1 must equal the
    replica's TP · DP (vLLM's expert parallel group is the whole replica).

    Why:
    `RolloutConfig.__post_init__` asserts `expert_parallel_size must be equal to
    tensor_model_parallel_size * data_parallel_size` at worker init.

    Fix:
    Set `actor_rollout_ref.rollout.expert_parallel_size` to TP · DP.

    Source:
    verl/workers/config/rollout.py RolloutConfig.__post_init__ (verl 0.9.1).
    """
    sizes = _rollout(job)
    if sizes is None:
        return
    ep_t = job.value(f"{RO}.expert_parallel_size")
    ep = need(ep_t, f"{RO}.expert_parallel_size")
    name = need(job.value(f"{RO}.name"), f"{RO}.name")
    tp, dp, _ = sizes
    if name != "trtllm" and ep is not None and ep > 1 and ep != tp * dp:
        yield finding(
            "VERL-RO-EP",
            f"expert_parallel_size must be equal to tensor_model_parallel_size * "
            f"data_parallel_size (verl: EP {ep}, TP {tp} · DP {dp} = {tp * dp})",
            where(ep_t, job.rollout.tp, job.rollout.dp),
            fix=f"{RO}.expert_parallel_size={tp * dp}",
        )


@rule("VERL-RO-WORLD", "error", "Rollout replicas (TP·DP·PP) must tile the trainer's world", frameworks=("verl",))
def rollout_world(job: Job) -> Iterator[Finding]:
    """
    In hybrid mode the rollout engine reuses the trainer's ranks: world / (TP·DP·PP) replicas, each
    a consecutive slice of ranks.

    Why:
    `ActorRolloutRefWorker.init_model` asserts `rollout world_size: W is not divisible by
    infer_world_size: S` after the training engines are built.

    Fix:
    Choose rollout TP·DP·PP dividing the world.

    Source:
    verl/workers/engine_workers.py ActorRolloutRefWorker.init_model (verl 0.9.1).
    """
    sizes = _rollout(job)
    if sizes is None:
        return
    w = need(job.cluster.world, "world size")
    size = sizes[0] * sizes[1] * sizes[2]
    if w % size:
        yield finding(
            "VERL-RO-WORLD",
            f"rollout world_size: {w} is not divisible by infer_world_size: {size} "
            f"(verl: TP {sizes[0]} · DP {sizes[1]} · PP {sizes[2]})",
            where(job.rollout.dp, job.rollout.tp),
            fix=f"make rollout TP·DP·PP a divisor of {w}",
        )


@rule(
    "VERL-RO-REPLICA-NODE", "error", "A rollout replica must fill whole nodes, or fit inside one", frameworks=("verl",)
)
def replica_nodes(job: Job) -> Iterator[Finding]:
    """
    A replica of S = TP·DP·PP ranks spans S / g nodes with g = min(rollout.n_gpus_per_node, S):
    S must divide by g. When S is smaller than a node, the node size must divide by S, or a replica
    straddles two nodes while its server runs on the first one only.

    Why:
    `RolloutReplica.__init__` asserts `world_size S must be divisible by gpus_per_node g`; a
    straddling replica is not checked and fails when its server starts.

    Fix:
    Make the replica a divisor or a multiple of the node size.

    Source:
    verl/workers/rollout/replica.py RolloutReplica.__init__;
    verl/workers/rollout/vllm_rollout/vllm_async_server.py (verl 0.9.1).
    """
    sizes = _rollout(job)
    if sizes is None:
        return
    g_t = job.value(f"{RO}.n_gpus_per_node")
    if g_t.known and g_t.value is None:
        return  # a verl without RolloutReplica (no rollout.n_gpus_per_node): nothing to judge
    per_node = need(g_t, f"{RO}.n_gpus_per_node")
    size = sizes[0] * sizes[1] * sizes[2]
    g = min(per_node, size)
    if size % g:
        yield finding(
            "VERL-RO-REPLICA-NODE",
            f"world_size {size} must be divisible by gpus_per_node {g} (verl RolloutReplica)",
            where(job.rollout.tp, job.rollout.dp, g_t),
            fix=f"a replica size TP·DP·PP that is a multiple of {per_node} or divides it",
        )
    elif size < per_node and per_node % size:
        yield finding(
            "VERL-RO-REPLICA-NODE",
            f"replicas of {size} ranks straddle nodes of {per_node} devices; each replica's server runs on one node",
            where(job.rollout.tp, job.rollout.dp),
            fix=f"a replica size dividing {per_node}",
        )


@rule("VERL-RO-VLLM-DP", "error", "vLLM data parallel: the node size must divide by rollout TP", frameworks=("verl",))
def vllm_dp(job: Job) -> Iterator[Finding]:
    """
    With rollout DP > 1 verl starts data_parallel_size_local = g / TP vLLM engines per node, so a
    node (g = min(n_gpus_per_node, replica size)) must hold whole TP groups.

    Why:
    `vLLMHttpServer.launch_server` asserts `gpus_per_node should be divisible by
    tensor_model_parallel_size` when the server starts.

    Fix:
    Keep rollout TP within a node when DP > 1.

    Source:
    verl/workers/rollout/vllm_rollout/vllm_async_server.py vLLMHttpServer.launch_server (verl 0.9.1).
    """
    sizes = _rollout(job)
    if sizes is None or need(job.value(f"{RO}.name"), f"{RO}.name") != "vllm":
        return
    tp, dp, pp = sizes
    g_t = job.value(f"{RO}.n_gpus_per_node")
    if g_t.known and g_t.value is None:
        return  # a verl without RolloutReplica (no rollout.n_gpus_per_node): nothing to judge
    g = min(need(g_t, f"{RO}.n_gpus_per_node"), tp * dp * pp)
    if dp > 1 and g % tp:
        yield finding(
            "VERL-RO-VLLM-DP",
            f"gpus_per_node should be divisible by tensor_model_parallel_size (verl: "
            f"{g} GPUs per node, rollout TP {tp}, DP {dp})",
            where(job.rollout.tp, g_t),
            fix=f"a rollout TP dividing {g}",
        )


@rule(
    "VERL-RO-MAXLEN",
    "error",
    "Rollout max_model_len must not exceed the model's max_position_embeddings",
    needs_model=True,
    frameworks=("verl",),
)
def rollout_max_len(job: Job) -> Iterator[Finding]:
    """
    verl's vLLM and SGLang servers take `max_model_len` (default: the model's
    `max_position_embeddings`) and reject a larger value, with no RoPE-scaling factor applied
    (stricter than vLLM itself; VLLM-MAXLEN-DERIVED is vLLM's own check).

    Why:
    `vLLMHttpServer._validate_configs` raises `ValueError: max_model_len (X) should be less than or
    equal to max_position_embeddings (P)` when the server is created.

    Fix:
    Lower max_model_len, or use a model config whose max_position_embeddings allows it
    (`actor_rollout_ref.model.override_config` changes only verl's copy of the config: vLLM still
    reads the model's config.json).

    Source:
    verl/workers/rollout/vllm_rollout/vllm_async_server.py vLLMHttpServer._validate_configs;
    verl/workers/rollout/sglang_rollout/async_sglang_server.py SGLangHttpServer.__init__ (verl 0.9.1).
    """
    if need(job.value(f"{RO}.name"), f"{RO}.name") not in ("vllm", "sglang"):
        return
    mml_t = job.value(f"{RO}.max_model_len")
    mml = need(mml_t, f"{RO}.max_model_len")
    limit = job.model.max_positions() if mml is not None else None
    if limit and mml is not None and mml > limit:
        yield finding(
            "VERL-RO-MAXLEN",
            f"max_model_len ({mml}) should be less than or equal to max_position_embeddings "
            f"({limit}) ({job.model.name}, {job.model.source})",
            where(mml_t),
            fix=f"{RO}.max_model_len={limit} or less",
        )


@rule(
    "VERL-RO-LEN-BUDGET",
    "warning",
    "prompt + response exceeds the rollout's max_model_len",
    needs_model=True,
    frameworks=("verl",),
)
def rollout_length_budget(job: Job) -> Iterator[Finding]:
    """
    Generation is clipped to max_model_len − prompt tokens; with max_prompt_length +
    max_response_length above max_model_len, long prompts get shorter responses than configured.

    Why:
    Silent clipping; a prompt of max_model_len tokens or more fails its request.

    Fix:
    Raise max_model_len (within max_position_embeddings) or lower the lengths.

    Source:
    verl/workers/rollout/vllm_rollout/vllm_async_server.py vLLMHttpServer.generate;
    verl/workers/rollout/sglang_rollout/async_sglang_server.py SGLangHttpServer.generate (verl 0.9.1).
    """
    if need(job.value(f"{RO}.name"), f"{RO}.name") not in ("vllm", "sglang"):
        return
    mml_t = job.value(f"{RO}.max_model_len")
    mml = need(mml_t, f"{RO}.max_model_len") or job.model.max_positions()
    total = need(job.value("data.max_prompt_length"), "data.max_prompt_length") + need(
        job.value("data.max_response_length"), "data.max_response_length"
    )
    if mml and total > mml:
        yield finding(
            "VERL-RO-LEN-BUDGET",
            f"max_prompt_length + max_response_length = {total} > max_model_len {mml}: "
            "responses of long prompts are clipped",
            where(mml_t),
            fix=f"{RO}.max_model_len={total} (if the model allows it)",
        )


@rule("VERL-RO-MODE", "error", "Rollout mode 'sync' has been removed", frameworks=("verl",))
def rollout_mode(job: Job) -> Iterator[Finding]:
    """
    verl 0.9 only runs the asynchronous rollout server.

    Why:
    `RolloutConfig.__post_init__` raises `ValueError: Rollout mode 'sync' has been removed.` at
    worker init.

    Versions:
    verl 0.7.0 and later (the check arrived with 0.7.0; 0.6.x defaults to and runs `mode: sync`).

    Fix:
    Remove `actor_rollout_ref.rollout.mode=sync`.

    Source:
    verl/workers/config/rollout.py RolloutConfig.__post_init__ (verl 0.7.0 … 0.9.1).
    """
    if job.rollout is None:
        return
    mode_t = job.value(f"{RO}.mode")
    if not at_least(job.framework_version, SYNC_ROLLOUT_REMOVED):
        return  # verl < 0.7.0 still runs the synchronous rollout
    if need(mode_t, f"{RO}.mode") == "sync":
        yield finding(
            "VERL-RO-MODE",
            "Rollout mode 'sync' has been removed. Please set "
            "`actor_rollout_ref.rollout.mode=async` or remove the mode setting entirely.",
            where(mode_t),
            fix=f"remove {RO}.mode=sync",
        )


@rule(
    "VERL-RO-MNBT",
    "warning",
    "Without chunked prefill max_num_batched_tokens must reach max_model_len",
    needs_model=True,
    frameworks=("verl",),
)
def batched_tokens(job: Job) -> Iterator[Finding]:
    """
    With `enable_chunked_prefill=False` a whole prompt must fit one scheduler step, so vLLM needs
    `max_num_batched_tokens ≥ max_model_len`. verl 0.9.1 does not fail: it raises
    `max_num_batched_tokens` to `max_model_len` (default: the model's max_position_embeddings)
    with a log warning (a warning here). Other verl versions hand the value to vLLM unchanged, and
    vLLM's `SchedulerConfig` refuses to start (an error here).

    Versions:
    verl 0.9.1: warning (raised by verl). Every other bundled version (≤ 0.9.0, main): error, with
    vLLM's text "max_num_batched_tokens (N) is smaller than max_model_len (M)".

    Why:
    A silent change of a memory-relevant setting (0.9.1), or an engine that does not start (others).

    Fix:
    Turn chunked prefill back on, or set the token budget explicitly.

    Source:
    verl/workers/rollout/vllm_rollout/vllm_async_server.py vLLMHttpServer._validate_configs (verl 0.9.1);
    vllm/config/scheduler.py SchedulerConfig._verify_args (vLLM).
    """
    if need(job.value(f"{RO}.name"), f"{RO}.name") != "vllm":
        return
    chunked_t = job.value(f"{RO}.enable_chunked_prefill")
    if need(chunked_t, f"{RO}.enable_chunked_prefill"):
        return
    mml = need(job.value(f"{RO}.max_model_len"), f"{RO}.max_model_len") or job.model.max_positions()
    mnbt_t = job.value(f"{RO}.max_num_batched_tokens")
    mnbt = need(mnbt_t, f"{RO}.max_num_batched_tokens")
    if mml and mnbt is not None and mnbt < mml:
        if job.framework_version in MNBT_RAISED_BY_VERL:
            yield finding(
                "VERL-RO-MNBT",
                f"enable_chunked_prefill=False requires max_num_batched_tokens >= "
                f"max_model_len ({mml}); verl raises max_num_batched_tokens from {mnbt} to "
                f"{mml}",
                where(chunked_t, mnbt_t),
                fix=f"{RO}.max_num_batched_tokens={mml}, or chunked prefill on",
            )
        else:
            yield finding(
                "VERL-RO-MNBT",
                f"this verl hands max_num_batched_tokens to vLLM "
                f'unchanged, and vLLM refuses to start: "max_num_batched_tokens ({mnbt}) is '
                f'smaller than max_model_len ({mml})" (chunked prefill is off)',
                where(chunked_t, mnbt_t),
                fix=f"{RO}.max_num_batched_tokens={mml}, or chunked prefill on",
                severity="error",
            )
