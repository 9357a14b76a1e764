"""verl's settings for the memory estimate (verl 0.9.1 key names; the keys are read in resolve.py)."""

from __future__ import annotations

from shardcheck.frameworks.memory_settings import (
    CriticSettings,
    FixKeys,
    Logits,
    Lora,
    OffloadShares,
    Recompute,
    RolloutSettings,
    TrainSettings,
    cuda_graph_note,
    dtype_bytes,
    dynamic_micro_batches,
    fp8_format,
    hybrid_offload,
    known,
    opt_fields,
    optional,
    require_adam,
)
from shardcheck.frameworks.memory_settings import setting as _v
from shardcheck.frameworks.verl.critic_batches import critic_packing
from shardcheck.job import Job, MegatronLayout
from shardcheck.origin import UnknownValue

A = "actor_rollout_ref.actor"
M = f"{A}.megatron"
RO = "actor_rollout_ref.rollout"
OTC = f"{M}.override_transformer_config"
OPT = f"{A}.optim"


def micro_batches(job: Job, cp: int, dp: int) -> tuple[int, int, int, str | None]:
    """(tokens per micro batch, sequence length, the most micro batches one pipeline runs per update, the
    dynamic-batch bound used: settings.dynamic_micro_batches)."""
    seq = _v(job, "data.max_prompt_length") + _v(job, "data.max_response_length")
    mini = _v(job, f"{A}.ppo_mini_batch_size") * _v(job, f"{RO}.n")
    if _v(job, f"{A}.use_dynamic_bsz"):
        # verl/workers/engine/utils.py prepare_micro_batches: max_token_len = max_token_len_per_gpu · sp_size
        # (the Megatron engine passes sp_size = context_parallel_size).
        tokens, count, longest, bound = dynamic_micro_batches(
            job, _v(job, f"{A}.ppo_max_token_len_per_gpu") * cp, mini // dp, seq
        )
        return tokens, longest, count, bound
    micro = _v(job, f"{A}.ppo_micro_batch_size_per_gpu")
    if not micro:
        raise UnknownValue(f"{A}.ppo_micro_batch_size_per_gpu is not set")
    return micro * seq, seq, max(1, mini // dp // micro), None


# LoRA target names → shardcheck's module names (memory/params.py). Megatron: Megatron-Bridge's module names
# (verl's model.lora.target_modules); FSDP: peft's on HF models (verl's model.target_modules, "all-linear").
_MEGATRON_TARGETS = {
    "linear_qkv": {"q", "k", "v"},
    "linear_proj": {"o"},
    "linear_fc1": {"gate", "up"},
    "linear_fc2": {"down"},
    "router": {"router"},
}
_HF_TARGETS = {f"{n}_proj": {n} for n in ("q", "k", "v", "o", "gate", "up", "down")}
_ALL_LINEAR = frozenset({"q", "k", "v", "o", "gate", "up", "down", "router"})


def lora(job: Job, megatron: bool) -> Lora | None:
    """The actor's LoRA (verl: the ref is then the actor without its adapters, resolve.py ``ref_in_actor``);
    None without it. The Megatron engine builds Megatron-Bridge's LoRA from ``model.lora`` (verl/workers/engine/
    megatron/transformer_impl.py ``peft_config=model_config.get("lora")``), the FSDP engine peft's from
    ``model.lora_rank`` and ``model.target_modules`` (fsdp/transformer_impl.py)."""
    in_actor = job.ref_in_actor
    if in_actor is None or in_actor.value is False:
        return None
    if not in_actor.known:
        raise UnknownValue("whether the actor has LoRA", in_actor)
    rank_key = "actor_rollout_ref.model.lora.rank" if megatron else "actor_rollout_ref.model.lora_rank"
    rank = job.value(rank_key).value
    if not isinstance(rank, int) or rank <= 0:
        raise UnknownValue(f"the LoRA rank the actor trains with ({rank_key} is not a known rank > 0)")
    key = "actor_rollout_ref.model.lora.target_modules" if megatron else "actor_rollout_ref.model.target_modules"
    targets = _v(job, key)
    names = [targets] if isinstance(targets, str) else list(targets or ())
    table = _MEGATRON_TARGETS if megatron else _HF_TARGETS
    modules: set[str] = set()
    for name in names:
        if not megatron and name == "all-linear":
            modules |= _ALL_LINEAR
        elif name in table:
            modules |= table[name]
        else:
            raise UnknownValue(f"LoRA target {name!r} ({key}) is not one whose adapters shardcheck sizes")
    return Lora(rank, frozenset(modules), fused=megatron)


def _optimizer(job: Job) -> tuple[int, OffloadShares]:
    """(grad bytes, the optimizer's bytes per parameter and where they live)."""
    aware = bool(_v(job, f"{OPT}.use_precision_aware_optimizer"))
    # verl/workers/engine/megatron/transformer_impl.py: grad_reduce_in_fp32 = not use_low_precision_main_grads
    grad = dtype_bytes(_v(job, f"{OPT}.main_grads_dtype"), f"{OPT}.main_grads_dtype") if aware else 4
    require_adam(job, f"{OPT}.optimizer", "=")
    moments = (
        (
            dtype_bytes(_v(job, f"{OPT}.exp_avg_dtype"), "exp_avg_dtype")
            + dtype_bytes(_v(job, f"{OPT}.exp_avg_sq_dtype"), "exp_avg_sq_dtype")
        )
        if aware
        else 8
    )
    if job.value(f"{OPT}.override_optimizer_config.optimizer_cpu_offload").value:
        fraction = job.value(f"{OPT}.override_optimizer_config.optimizer_offload_fraction").value
        return grad, hybrid_offload(1.0 if fraction is None else float(fraction), aware)
    return grad, OffloadShares(4 + moments, 1.0, 0.0, 1.0)


def _recompute(job: Job) -> Recompute:
    modules = _v(job, f"{OTC}.recompute_modules") or ["core_attn"]
    return Recompute(
        granularity=_v(job, f"{OTC}.recompute_granularity"),
        method=_v(job, f"{OTC}.recompute_method"),
        num_layers=_v(job, f"{OTC}.recompute_num_layers"),
        modules=frozenset(modules),
    )


def _logits(job: Job, fp32_buffers: int) -> Logits:
    entropy = bool(_v(job, f"{A}.calculate_entropy")) or bool(_v(job, f"{A}.entropy_coeff"))
    chunk = None
    if entropy and _v(job, f"{A}.entropy_from_logits_with_chunking"):
        chunk = _v(job, f"{A}.entropy_from_logits_chunk_size") or 2048
    # verl/utils/kernel/linear_cross_entropy.py: with use_fused_kernels the logits are never whole.
    return Logits(
        fused=bool(job.value(f"{A}.use_fused_kernels").value),
        entropy=entropy,
        entropy_chunk=chunk,
        fp32_buffers=fp32_buffers,
    )


def _mtp_layers(job: Job) -> int:
    """MTP depths the actor builds. The checkpoint's depth (``num_nextn_predict_layers``, Qwen3.5's
    ``mtp_num_hidden_layers`` from 0.8.0) only where verl builds them: from 0.7.1 only with ``model.mtp.enable``
    (else ``check_mtp_config`` and the legacy Megatron workers zero the config's depth, verl/utils/
    megatron_utils.py, verl/workers/megatron_workers.py; 0.9.1 also forces ``mtp_num_layers`` None); before
    0.7.1 mbridge reads the depth from the config (mbridge mbridge/models/deepseek_v3.py, mimo.py) when
    ``megatron.use_mbridge`` is set (0.5.0 on; verl's own converter before it builds no MTP layer)."""
    from shardcheck.frameworks.verl.versions import MTP_KEYED, at_least, mtp_keys
    from shardcheck.models.architecture import checkpoint_mtp_layers

    if job.model is None:
        return 0
    if at_least(job.framework_version, MTP_KEYED):
        if not _v(job, "actor_rollout_ref.model.mtp.enable"):
            return 0
        return checkpoint_mtp_layers(job.model.config, mtp_keys(job.framework_version))
    depth = checkpoint_mtp_layers(job.model.config)
    if not depth or not at_least(job.framework_version, "0.5.0"):  # megatron.use_mbridge arrived in 0.5.0
        return 0
    return depth if _v(job, f"{M}.use_mbridge") else 0


def train_settings(job: Job, layout: MegatronLayout, dp: int) -> TrainSettings:
    cp = known(layout.cp, "CP")
    tokens, seq, count, bound = micro_batches(job, cp, dp)
    grad, opt = _optimizer(job)
    # verl's reference model, colocated and built with the actor's sizes by default, stays on the device
    # during the update unless ref.megatron.param_offload moves it away.
    ref = job.layout("ref") is not None and not job.value("actor_rollout_ref.ref.megatron.param_offload").value
    return TrainSettings(
        weight_bytes=dtype_bytes(_v(job, f"{M}.dtype"), f"{M}.dtype"),
        grad_bytes=grad,
        distributed_optimizer=bool(_v(job, f"{M}.use_distributed_optimizer")),
        **opt_fields(opt),
        tokens_per_micro_batch=tokens,
        sequence_length=seq,
        micro_batches=count,
        recompute=_recompute(job),
        # verl/utils/megatron/tensor_parallel.py vocab_parallel_log_probs_from_logits → megatron-core's
        # vocab_parallel_cross_entropy: one fp32 copy of the logits, exponentiated in place and saved for
        # backward, whose gradient is written into it (tensor_parallel/cross_entropy.py).
        logits=_logits(job, 1),
        ref_on_device=ref,
        lora=lora(job, megatron=True),
        param_offload=f"{M}.param_offload" if job.value(f"{M}.param_offload").value else None,
        optimizer_offload=f"{M}.optimizer_offload" if job.value(f"{M}.optimizer_offload").value else None,
        batch_bound=bound,
        step_tokens=count * seq if bound is not None and job.sample_tokens is None else None,
        mtp_layers=_mtp_layers(job),
        # verl passes override_transformer_config to megatron-core's TransformerConfig (verl
        # examples/grpo_trainer/run_nemotron_nano_v3_30b_a3b_megatron.sh: fp8="e4m3" or "hybrid", fp8_recipe)
        fp8=fp8_format(optional(job, f"{OTC}.fp8")),
        fp8_recipe=optional(job, f"{OTC}.fp8_recipe"),
        # TransformerConfig.fp8_param: FP8 primary weights (megatron/core/fp8_utils.py builds the modules in the
        # FP8 init context; Megatron-LM's --fp8-param-gather sets the same field, megatron/training/arguments.py)
        fp8_params=bool(optional(job, f"{OTC}.fp8_param")),
        overlap_moe_a2a=bool(optional(job, f"{OTC}.overlap_moe_expert_parallel_comm")),
        not_modelled=_cuda_graphs(job),
    )


def _cuda_graphs(job: Job) -> tuple[tuple[str, str], ...]:
    """TransformerConfig's CUDA graphs (``cuda_graph_impl`` from core_v0.15, ``enable_cuda_graph`` before), set
    through override_transformer_config: their static buffers and memory pool are not modelled."""
    impl = optional(job, f"{OTC}.cuda_graph_impl")
    on = [(f"{OTC}.cuda_graph_impl", f"{OTC}.cuda_graph_impl={impl}")] if impl not in (None, "none") else []
    if optional(job, f"{OTC}.enable_cuda_graph"):
        on.append((f"{OTC}.enable_cuda_graph", f"{OTC}.enable_cuda_graph=True"))
    return cuda_graph_note(on)


SGL = f"{RO}.engine_kwargs.sglang"


def rollout_settings(job: Job, moe: bool, max_position_embeddings: int | None) -> RolloutSettings:
    ro = job.rollout
    if ro is None:
        raise UnknownValue("no rollout engine")
    tp, dp = known(ro.tp, f"{RO}.tensor_model_parallel_size"), known(ro.dp, f"{RO}.data_parallel_size")
    request = _v(job, "data.max_prompt_length") + _v(job, "data.max_response_length")
    world = job.cluster.world
    replicas = world.value // (tp * dp) if world.known and world.value and tp * dp else None
    engine = str(known(ro.engine, f"{RO}.name"))
    fraction = float(_v(job, f"{RO}.gpu_memory_utilization"))
    engine_tp, engines = tp, dp
    if engine == "sglang":
        # verl starts one SGLang engine per replica with tp_size = TP · DP; with DP attention (and DP > 1)
        # attention splits over TP and each DP rank keeps its own KV cache, else over all TP · DP ranks
        # (verl/workers/rollout/sglang_rollout/async_sglang_server.py; sglang/srt/layers/dp_attention.py).
        # The dense layers are counted at the attention split: an upper bound with DP attention.
        if not (bool(_v(job, f"{SGL}.enable_dp_attention")) and dp > 1):
            engine_tp, engines = tp * dp, 1
        fraction = float(job.value(f"{SGL}.mem_fraction_static").value or fraction)
    steps = job.value("data.train_batch_size"), job.value(f"{RO}.n")
    per_step = steps[0].value * steps[1].value if all(t.known and t.value for t in steps) else None
    return RolloutSettings(
        engine=engine,
        tp=engine_tp,
        dp=engines,
        ep=(_v(job, f"{RO}.expert_parallel_size") or 1) if moe else 1,
        dtype_bytes=dtype_bytes(_v(job, f"{RO}.dtype"), f"{RO}.dtype"),
        memory_fraction=fraction,
        max_num_batched_tokens=_v(job, f"{RO}.max_num_batched_tokens") or 8192,
        max_num_seqs=_v(job, f"{RO}.max_num_seqs"),
        request_tokens=request,
        # verl: max_model_len defaults to the model's max_position_embeddings
        max_model_len=_v(job, f"{RO}.max_model_len") or max_position_embeddings or request,
        requests_per_step=per_step,
        replicas=replicas,
    )


def fsdp_train_settings(job: Job, layout, dp: int) -> TrainSettings:
    """The FSDP engine's update settings (verl/workers/engine/fsdp/transformer_impl.py, verl 0.9.1).

    Parameters live sharded in ``model_dtype`` (fp32 by default: they are the master weights), gradients
    in the same dtype, AdamW's two moments in the same dtype (torch.optim keeps state like the parameter);
    compute runs in bf16 (MixedPrecision param_dtype, default bf16) on one gathered FSDP unit at a time.
    """
    sp = known(layout.sp, f"{layout.key_prefix}.ulysses_sequence_parallel_size")
    tokens, seq, _count, bound = micro_batches(job, sp, dp)
    param = dtype_bytes(
        known(layout.model_dtype, f"{layout.key_prefix}.model_dtype"), f"{layout.key_prefix}.model_dtype"
    )
    require_adam(job, f"{OPT}.optimizer", "=")
    strategy = known(layout.strategy, f"{A}.strategy")
    policy = strategy == "fsdp2" and bool(known(layout.offload_policy, f"{layout.key_prefix}.offload_policy"))
    return TrainSettings(
        weight_bytes=param,
        grad_bytes=param,
        state_bytes=2 * param,
        distributed_optimizer=True,
        optimizer_on_device=1.0,
        # verl/utils/torch_functional.py logprobs_from_logits: flash-attn's cross-entropy kernel with an
        # in-place backward works row by row on the bf16 logits: no whole fp32 copy.
        tokens_per_micro_batch=tokens,
        sequence_length=seq,
        micro_batches=1,
        recompute=Recompute(),
        logits=_logits(job, 0),
        # verl forces CPUOffload(offload_params=True) (fsdp) / CPUOffloadPolicy (fsdp2) on the reference model.
        ref_on_device=False,
        param_offload=f"{layout.key_prefix}.param_offload" if layout.param_offload.value else None,
        optimizer_offload=f"{layout.key_prefix}.optimizer_offload" if layout.optimizer_offload.value else None,
        checkpointing=bool(_v(job, "actor_rollout_ref.model.enable_gradient_checkpointing")),
        gathered_between_passes=not _v(job, f"{layout.key_prefix}.reshard_after_forward"),
        host_resident=policy,
        batch_bound=bound,
        lora=lora(job, megatron=False) if layout.role == "actor" else None,
    )


def critic_settings(job: Job) -> CriticSettings | None:
    """The critic verl builds beside the actor (need_critic), colocated in the same processes (its pool is
    global_pool: verl/trainer/ppo/v1/trainer_base.py). Its model must be the actor's for shardcheck to
    size it; verl's critic is the same network with a one-output value head."""
    used = job.critic_used
    if used is None or not used.known or not used.value:
        return None
    strategy = known(job.value("critic.strategy"), "critic.strategy")
    path, actor_path = job.value("critic.model.path"), job.model_path
    same = (
        path.known
        and actor_path.known
        and str(path.value).rstrip("/").rsplit("/", 1)[-1] == str(actor_path.value).rstrip("/").rsplit("/", 1)[-1]
    )
    if not same:
        raise UnknownValue(
            f"the critic's model (critic.model.path={path.value if path.known else '?'}) is not the "
            "actor's; its state on the device is not sized"
        )
    tokens = _critic_tokens(job, strategy)
    if strategy == "megatron":
        return CriticSettings(
            keeps_params=not _v(job, "critic.megatron.param_offload"),
            keeps_optimizer=not _v(job, "critic.megatron.optimizer_offload"),
            engine="megatron",
            tokens_per_micro_batch=tokens,
        )
    layout = job.fsdp_layout("critic")
    if layout is None:
        raise UnknownValue(f"critic.strategy={strategy} is not an engine shardcheck sizes")
    return CriticSettings(
        keeps_params=not known(layout.param_offload, f"{layout.key_prefix}.param_offload"),
        keeps_optimizer=not known(layout.optimizer_offload, f"{layout.key_prefix}.optimizer_offload"),
        engine="fsdp",
        tokens_per_micro_batch=tokens,
    )


def _critic_tokens(job: Job, strategy: str) -> int | None:
    """Tokens of one critic update micro batch: packed by tokens, the update pass's budget × CP (the critic
    engine's sequence split, verl/workers/engine/utils.py prepare_micro_batches; which budget, and whether a
    Megatron critic packs at all, by version: critic_batches.critic_packing), else
    critic.ppo_micro_batch_size_per_gpu × (prompt + response)."""
    try:
        dynamic = bool(job.value("critic.use_dynamic_bsz").value)
        budget_key = "critic.ppo_max_token_len_per_gpu"
        if strategy == "megatron":
            dynamic, keys = critic_packing(job, not dynamic)
            budget_key = keys[0]
        if dynamic:
            cp = job.value("critic.megatron.context_parallel_size").value or 1
            budget = job.value(budget_key).value
            return budget * cp if budget else None
        micro = job.value("critic.ppo_micro_batch_size_per_gpu").value
        return micro * (_v(job, "data.max_prompt_length") + _v(job, "data.max_response_length")) if micro else None
    except (UnknownValue, TypeError, KeyError):
        return None


# The settings the MEM-* findings name for a verl job (Megatron engine, FSDP engine).
MEGATRON_FIX_KEYS = FixKeys(
    activations=(
        f"{A}.megatron.override_transformer_config.recompute_granularity",
        f"+{A}.megatron.override_transformer_config.recompute_granularity=full (with recompute_method="
        "uniform, recompute_num_layers=1), or fewer tokens per micro batch "
        f"({A}.ppo_micro_batch_size_per_gpu / ppo_max_token_len_per_gpu), or a larger CP",
    ),
    logits=(
        f"{A}.use_fused_kernels",
        "actor_rollout_ref.model.use_fused_kernels=True (verl's fused linear "
        "cross-entropy), or a larger TP (the vocab is split over TP), or fewer tokens per micro batch",
    ),
    optimizer=(
        f"{A}.megatron.use_distributed_optimizer",
        f"{A}.megatron.use_distributed_optimizer=True, a "
        f"larger DP/EDP, or +{A}.optim.override_optimizer_config.optimizer_cpu_offload=True",
    ),
    weights=(f"{A}.megatron.pipeline_model_parallel_size", "a larger PP, EP or TP (fewer parameters per device)"),
    memory_fraction=f"{RO}.gpu_memory_utilization",
    max_model_len=f"{RO}.max_model_len",
    rollout_dp=f"{RO}.data_parallel_size",
    response="data.max_response_length",
    offload=(
        f"{A}.megatron.param_offload",
        f"{A}.megatron.optimizer_offload",
        f"{A}.megatron.optimizer_offload=False, or more nodes",
    ),
)

FSDP_FIX_KEYS = FixKeys(
    activations=(
        "actor_rollout_ref.model.enable_gradient_checkpointing",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True, fewer tokens per micro batch "
        f"({A}.ppo_micro_batch_size_per_gpu / ppo_max_token_len_per_gpu), or a larger "
        f"{A}.ulysses_sequence_parallel_size",
    ),
    logits=(
        f"{A}.use_fused_kernels",
        "actor_rollout_ref.model.use_fused_kernels=True (verl's fused linear "
        f"cross-entropy), or a larger {A}.ulysses_sequence_parallel_size, or fewer tokens per micro batch",
    ),
    optimizer=(
        f"{A}.fsdp_config.fsdp_size",
        f"{A}.fsdp_config.fsdp_size=-1 (shard over the whole world), more GPUs, "
        f"or {A}.strategy=fsdp2 with {A}.fsdp_config.offload_policy=True",
    ),
    weights=(
        f"{A}.fsdp_config.fsdp_size",
        f"{A}.fsdp_config.fsdp_size=-1 (shard over the whole world), more GPUs, or {A}.fsdp_config.model_dtype=bf16",
    ),
    memory_fraction=f"{RO}.gpu_memory_utilization",
    max_model_len=f"{RO}.max_model_len",
    rollout_dp=f"{RO}.data_parallel_size",
    response="data.max_response_length",
    offload=(
        f"{A}.fsdp_config.param_offload",
        f"{A}.fsdp_config.optimizer_offload",
        f"{A}.fsdp_config.optimizer_offload=False, or more nodes",
    ),
)


def fix_keys(job: Job) -> FixKeys:
    return FSDP_FIX_KEYS if job.layout("actor") is None and job.fsdp_layout("actor") else MEGATRON_FIX_KEYS
