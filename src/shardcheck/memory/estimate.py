"""Per-device memory of a verl Megatron job: each pipeline stage's training peak, the rollout, the host.

What each term is (the sources are in the modules that compute them, and in ``TERMS`` for ``--explain``):
- weights: parameters (memory/params.py, exact) × the engine dtype (verl ``megatron.dtype``, bf16);
- grads: Megatron DDP's ``main_grad`` buffer over all local parameters, fp32 unless the precision-aware
  optimizer is on with a 16-bit ``main_grads_dtype`` (verl/workers/engine/megatron/transformer_impl.py
  sets ``grad_reduce_in_fp32 = not use_low_precision_main_grads``);
- optimizer: Adam's fp32 master weights + ``exp_avg`` + ``exp_avg_sq`` (their dtypes from verl's optim
  config); the distributed optimizer shards dense state over DP·CP and expert state over EDP
  (megatron/core/optimizer/distrib_optimizer.py, one shard per rank of the data-parallel group with CP);
  Megatron's ``optimizer_cpu_offload`` keeps ``1 - optimizer_offload_fraction`` of it on the device;
- activations: memory/activations.py per layer, times the micro batches a stage holds under 1F1B
  (pipeline stage s keeps ``min(PP - s, micro batches)``; with interleaving, Megatron-Core's warm-up
  ``(PP - s - 1)·2 + (VPP - 1)·PP`` plus one chunk, megatron/core/pipeline_parallel/schedules.py
  ``get_pp_rank_microbatches``);
- logits (last stage): one micro batch's vocab-parallel logits in bf16, the fp32 copy and gradient of
  the log-softmax (verl/utils/megatron/tensor_parallel.py ``vocab_parallel_log_probs_from_logits``), and
  the entropy's two fp32 tensors when the entropy is computed (per chunk with
  ``entropy_from_logits_with_chunking``);
- workspace: a stated allowance (``WORKSPACE_BYTES``) for NCCL buffers, kernels' workspaces and
  allocator fragmentation.
verl's ``param_offload`` / ``optimizer_offload`` move state to the host between phases; during the
update it is back on the device, so they change the rollout phase and the host, not the training peak.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from shardcheck.frameworks.megatron.pipeline import Split, split_layers, stage_layer_indices
from shardcheck.job import Job, MegatronLayout
from shardcheck.memory.activations import Parallel, Recompute, layer_bytes
from shardcheck.memory.devices import GIB, Device, device_for
from shardcheck.memory.params import Sharding, StageParams, stage_params
from shardcheck.models.architecture import Architecture, NotModelled, architecture
from shardcheck.origin import Traced

A = "actor_rollout_ref.actor"
M = f"{A}.megatron"
RO = "actor_rollout_ref.rollout"
OTC = f"{M}.override_transformer_config"
OPT = f"{A}.optim"
WORKSPACE_BYTES = 2 * GIB
ROLLOUT_RESERVE_BYTES = 1 * GIB  # vLLM's CUDA graphs and NCCL, outside its profiled activations
DTYPE_BYTES = {"bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2, "float32": 4, "fp32": 4, "float": 4,
               "auto": 2}


class Unknown(Exception):
    """A value the estimate needs is unknown: the estimate says so instead of guessing."""


def _v(job: Job, key: str):
    t: Traced = job.value(key)
    if not t.known:
        raise Unknown(f"{key} is unknown ({t.unknown})")
    return t.value


def _t(traced: Traced, name: str):
    if not traced.known:
        raise Unknown(f"{name} is unknown ({traced.unknown})")
    return traced.value


def _dtype_bytes(name, key: str) -> int:
    text = str(name).replace("torch.", "").lower()
    if text not in DTYPE_BYTES:
        raise Unknown(f"{key}={name} is not a dtype shardcheck sizes")
    return DTYPE_BYTES[text]


@dataclass
class StageMemory:
    stage: int
    ranks: list[int]  # the pipeline ranks with these figures
    layers: int
    params: StageParams
    bytes: dict[str, int]
    micro_batches_in_flight: int

    @property
    def total(self) -> int:
        return self.bytes["total"]


@dataclass
class TrainMemory:
    stages: list[StageMemory]
    tokens_per_micro_batch: int
    sequence_length: int
    static_bytes_max: int  # weights + grads + optimizer of the largest stage (exact, not estimated)


@dataclass
class RolloutMemory:
    engine: str
    tp: int
    dp: int
    ep: int
    replicas: int | None
    weights_bytes: int
    kv_bytes_per_token: int
    kv_budget_bytes: int
    reserve_bytes: int
    request_tokens: int  # prompt + response: one full-length request
    max_model_len: int
    max_concurrent_full_requests: int  # per engine (one TP group with its own KV cache)
    max_num_seqs: int | None
    requests_per_replica: int | None  # train_batch_size · n spread over the replicas

    @property
    def concurrent_per_replica(self) -> int:
        return self.max_concurrent_full_requests * self.dp

    @property
    def requests_per_engine(self) -> int | None:
        return -(-self.requests_per_replica // self.dp) if self.requests_per_replica is not None else None
    training_resident_bytes: int  # training state verl leaves on the device during generation
    kv_replicated: bool


@dataclass
class HostMemory:
    offloaded_bytes_per_device: int
    devices_per_node: int | None
    bytes_per_node: int | None
    terms: list[str]


@dataclass
class MemoryEstimate:
    path: str
    device: Device
    train: TrainMemory | None = None
    rollout: RolloutMemory | None = None
    host: HostMemory | None = None
    problems: list[str] = field(default_factory=list)  # why a part could not be estimated


def estimate(job: Job, device_choice: str | None = None) -> MemoryEstimate:
    """The memory estimate of ``job`` on ``device_choice`` (else the default for trainer.device)."""
    kind = job.cluster.device.value if job.cluster.device.known else None
    device = device_for(device_choice, kind)
    out = MemoryEstimate(job.path, device)
    if job.model is None:
        out.problems.append(f"no model facts: {job.model_problem or 'model not found'}")
        return out
    try:
        arch = architecture(job.model)
    except NotModelled as exc:
        out.problems.append(f"parameter counts unknown: {exc}")
        return out
    layout = job.layout("actor")
    if layout is None:
        out.problems.append("no Megatron actor engine (the FSDP engine's estimate is not built yet)")
    else:
        for part, fn in (("train", lambda: _train(job, arch, layout)), ("rollout", lambda: _rollout(job, arch, device))):
            try:
                setattr(out, part, fn())
            except Unknown as exc:
                out.problems.append(f"{part}: {exc}")
    if out.train is not None:
        out.host = _host(job, out.train)
    if out.rollout is not None and out.train is not None:
        out.rollout.training_resident_bytes = _resident(job, out.train)
    return out


def _sharding(layout: MegatronLayout) -> Sharding:
    return Sharding(tp=_t(layout.tp, "TP"), ep=_t(layout.ep, "EP"), etp=_t(layout.etp, "ETP"), pp=_t(layout.pp, "PP"))


def _check_shards(arch: Architecture, s: Sharding, what: str) -> None:
    """Counts per device are only defined for a layout the framework accepts (the layout rules say why not)."""
    splits = [("attention heads", arch.heads, s.tp), ("vocab", arch.vocab, s.tp)]
    if arch.experts:
        splits += [("experts", arch.experts, s.ep), ("expert FFN", arch.moe_ffn, s.etp)]
    if arch.ffn:
        splits.append(("FFN", arch.ffn, s.tp))
    bad = [f"{name} {n} over {k}" for name, n, k in splits if not k or n % k]
    if bad:
        raise Unknown(f"the {what} layout does not split the model evenly ({', '.join(bad)}); fix the layout first")


def _split(layout: MegatronLayout, arch: Architecture) -> tuple[Split, tuple[tuple[int, ...], ...]]:
    if layout.layout_string.known and layout.layout_string.value:
        raise Unknown("pipeline_model_parallel_layout is set; shardcheck does not split by layout strings yet")
    vpp = _t(layout.vpp, "VPP")
    emb, loss = bool(_t(layout.account_for_embedding, "account_for_embedding")), bool(_t(layout.account_for_loss, "account_for_loss"))
    split = split_layers(arch.num_layers, _t(layout.pp, "PP"), first=_t(layout.first_stage_layers, "first stage layers"),
                         last=_t(layout.last_stage_layers, "last stage layers"), vpp=vpp, account_for_embedding=emb,
                         account_for_loss=loss)
    if not isinstance(split, Split):
        raise Unknown(f"the layer split fails ({split.rule}); fix the layout first")
    return split, stage_layer_indices(split, arch.num_layers, vpp=vpp, account_for_embedding=emb, account_for_loss=loss)


def _micro_batch(job: Job, layout: MegatronLayout, dp: int) -> tuple[int, int, int | None]:
    """(tokens per micro batch, sequence length, the most micro batches one pipeline runs per update).

    With dynamic batch size the count depends on the sample lengths; at most every sample is its own
    micro batch, which bounds the micro batches a stage can hold from above."""
    seq = _v(job, "data.max_prompt_length") + _v(job, "data.max_response_length")
    cp = _t(layout.cp, "CP")
    mini = _v(job, f"{A}.ppo_mini_batch_size") * _v(job, f"{RO}.n")
    if _v(job, f"{A}.use_dynamic_bsz"):
        # verl/workers/engine/utils.py prepare_micro_batches: max_token_len = max_token_len_per_gpu · sp_size
        # (the Megatron engine passes sp_size = context_parallel_size).
        return _v(job, f"{A}.ppo_max_token_len_per_gpu") * cp, seq, max(1, mini // dp)
    micro = _v(job, f"{A}.ppo_micro_batch_size_per_gpu")
    if not micro:
        raise Unknown(f"{A}.ppo_micro_batch_size_per_gpu is not set")
    return micro * seq, seq, max(1, mini // dp // micro)


def _recompute(job: Job) -> Recompute:
    granularity = _v(job, f"{OTC}.recompute_granularity")
    modules = _v(job, f"{OTC}.recompute_modules") or ["core_attn"]
    return Recompute(granularity=granularity, method=_v(job, f"{OTC}.recompute_method"),
                     num_layers=_v(job, f"{OTC}.recompute_num_layers"), modules=frozenset(modules))


def _in_flight(stage: int, pp: int, vpp: int | None, micro_batches: int) -> tuple[int, int]:
    """(micro batches a stage holds at its peak, in units of one chunk's layers; chunks per stage)."""
    chunks = vpp or 1
    if chunks == 1:
        held = pp - stage
    else:
        held = (pp - stage - 1) * 2 + (chunks - 1) * pp + 1
    return min(held, micro_batches * chunks), chunks


def _activations(arch: Architecture, layers: tuple[int, ...], tokens: int, seq: int, p: Parallel,
                 rc: Recompute) -> tuple[float, float]:
    """(bytes one micro batch keeps on this stage, bytes of the one recompute in progress in backward)."""
    per = [layer_bytes(arch, i, tokens, seq, p, rc) for i in layers]
    if rc.granularity != "full" or not per:
        return sum(per), 0.0
    full = [layer_bytes(arch, i, tokens, seq, p, Recompute()) for i in layers]
    n = max(1, rc.num_layers or 1)
    if rc.method == "block":
        # the first n layers of the stage keep only their inputs (recomputed one at a time); the rest keep all
        return sum(per[:n]) + sum(full[n:]), max(full[:n])
    # uniform: the input of each group of n layers is kept; backward recomputes one group at a time
    return sum(per[::n]), max(sum(full[i:i + n]) for i in range(0, len(full), n))


FUSED_CHUNK_TOKENS = 4096


def _logits(job: Job, arch: Architecture, tokens: int, tp: int, cp: int) -> int:
    local = tokens / cp * arch.vocab / tp
    if job.value(f"{A}.use_fused_kernels").value:
        # verl's fused linear + cross-entropy (verl/utils/kernel/linear_cross_entropy.py) never holds the
        # whole logits; shardcheck allows one fp32 chunk and its gradient.
        local = min(FUSED_CHUNK_TOKENS, tokens / cp) * arch.vocab / tp
        return int(local * (4 + 4))
    out = local * (2 + 4 + 4)  # bf16 logits, fp32 log-softmax and its gradient
    entropy = bool(_v(job, f"{A}.calculate_entropy")) or bool(_v(job, f"{A}.entropy_coeff"))
    if entropy:
        if _v(job, f"{A}.entropy_from_logits_with_chunking"):
            chunk = _v(job, f"{A}.entropy_from_logits_chunk_size") or 2048
            out += 2 * 4 * min(chunk, tokens / cp) * arch.vocab / tp
        else:
            out += 2 * 4 * local
    return int(out)


def _train(job: Job, arch: Architecture, layout: MegatronLayout) -> TrainMemory:
    sharding = _sharding(layout)
    _check_shards(arch, sharding, "training")
    dp = _t(layout.dp(job.cluster.world), "DP")
    edp = _t(layout.edp(job.cluster.world), "EDP")
    if not dp or not edp:
        raise Unknown("the layout does not tile the world (see the MCORE-PS findings); fix the layout first")
    cp = _t(layout.cp, "CP")
    split, indices = _split(layout, arch)
    tokens, seq, micro_batches = _micro_batch(job, layout, dp)
    weight_bytes = _dtype_bytes(_v(job, f"{M}.dtype"), f"{M}.dtype")
    aware = bool(_v(job, f"{OPT}.use_precision_aware_optimizer"))
    grad_bytes = _dtype_bytes(_v(job, f"{OPT}.main_grads_dtype"), f"{OPT}.main_grads_dtype") if aware else 4
    optimizer = str(_v(job, f"{OPT}.optimizer")).lower()
    if optimizer not in ("adam", "adamw"):
        raise Unknown(f"{OPT}.optimizer={optimizer}: shardcheck sizes Adam's state only")
    moments = (_dtype_bytes(_v(job, f"{OPT}.exp_avg_dtype"), "exp_avg_dtype")
               + _dtype_bytes(_v(job, f"{OPT}.exp_avg_sq_dtype"), "exp_avg_sq_dtype")) if aware else 8
    state_bytes = 4 + moments  # fp32 master weights + the two moments
    distributed = bool(_v(job, f"{M}.use_distributed_optimizer"))
    on_device = 1.0  # the share of the optimizer state Megatron keeps on the device
    if job.value(f"{OPT}.override_optimizer_config.optimizer_cpu_offload").value:
        fraction = job.value(f"{OPT}.override_optimizer_config.optimizer_offload_fraction").value
        on_device = 1.0 - (1.0 if fraction is None else float(fraction))
    p = Parallel(tp=sharding.tp, sequence_parallel=bool(_t(layout.sequence_parallel, "sequence_parallel")) and sharding.tp > 1,
                 cp=cp, ep=sharding.ep, etp=sharding.etp)
    rc = _recompute(job)
    vpp = _t(layout.vpp, "VPP")
    # verl's reference model, colocated with the actor and built with the same sizes by default, stays
    # on the device during the update unless ref.megatron.param_offload moves it away.
    ref_on_device = job.layout("ref") is not None and not job.value("actor_rollout_ref.ref.megatron.param_offload").value
    rows: list[StageMemory] = []
    for stage, layers in enumerate(indices):
        params = stage_params(arch, layers, stage, sharding)
        dense = params.embedding + params.dense + params.output
        opt = dense * state_bytes / (dp * cp if distributed else 1) + params.expert * state_bytes / (edp if distributed else 1)
        held, chunks = _in_flight(stage, sharding.pp, vpp, micro_batches)
        stored, recomputing = _activations(arch, layers, tokens, seq, p, rc)
        acts = stored * held / chunks + recomputing / chunks
        logits = _logits(job, arch, tokens, sharding.tp, cp) if stage == sharding.pp - 1 else 0
        terms = {
            "weights": params.total * weight_bytes,
            "grads": params.total * grad_bytes,
            "optimizer": int(opt * on_device),
            "optimizer_host": int(opt * (1 - on_device)),
            "activations": int(acts),
            "logits": logits,
            "ref_weights": params.total * weight_bytes if ref_on_device else 0,
            "workspace": WORKSPACE_BYTES,
        }
        terms["total"] = sum(v for k, v in terms.items() if k != "optimizer_host")
        rows.append(StageMemory(stage, [stage], len(layers), params, terms, held))
    merged: list[StageMemory] = []
    for row in rows:
        same = next((m for m in merged if m.bytes == row.bytes and m.params == row.params), None)
        if same is not None:
            same.ranks.append(row.stage)
        else:
            merged.append(row)
    static = max(r.bytes["weights"] + r.bytes["grads"] + r.bytes["optimizer"] for r in rows)
    return TrainMemory(merged, tokens, seq, static)


def kv_bytes_per_token(arch: Architecture, tp: int, dtype_bytes: int = 2) -> tuple[int, bool]:
    """KV-cache bytes per token on one device of a rollout TP group, and whether KV heads are replicated.

    GQA: K and V of ``max(1, kv_heads / TP)`` heads per layer; vLLM replicates KV heads when TP exceeds
    them (vllm/model_executor/layers/linear.py ``QKVParallelLinear``: ``num_kv_head_replicas``).
    MLA: the latent ``kv_lora_rank + qk_rope_head_dim`` per layer on every TP rank (vLLM's MLA backends
    cache the compressed latent, not per-head K/V).
    """
    if arch.mla is not None:
        return arch.num_layers * (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * dtype_bytes, True
    heads = max(1, arch.kv_heads // tp)
    return 2 * arch.num_layers * heads * arch.head_dim * dtype_bytes, tp > arch.kv_heads


def _rollout(job: Job, arch: Architecture, device: Device) -> RolloutMemory:
    ro = job.rollout
    if ro is None:
        raise Unknown("no rollout engine")
    engine = str(_t(ro.engine, f"{RO}.name"))
    tp, dp = _t(ro.tp, f"{RO}.tensor_model_parallel_size"), _t(ro.dp, f"{RO}.data_parallel_size")
    ep = (_v(job, f"{RO}.expert_parallel_size") or 1) if arch.experts else 1
    everything = tuple(range(arch.num_layers))
    sharding = Sharding(tp=tp, ep=ep, etp=1 if ep > 1 else tp, pp=1)
    _check_shards(arch, sharding, "rollout")
    dtype = _dtype_bytes(_v(job, f"{RO}.dtype"), f"{RO}.dtype")
    weights = stage_params(arch, everything, 0, sharding).total * dtype
    per_token, replicated = kv_bytes_per_token(arch, tp, dtype)
    util = float(_v(job, f"{RO}.gpu_memory_utilization"))
    batched = _v(job, f"{RO}.max_num_batched_tokens") or 8192
    seqs = _v(job, f"{RO}.max_num_seqs")
    widest = max(2 * (arch.ffn or 0), 2 * arch.moe_ffn * max(arch.topk, 1), (arch.heads + 2 * arch.kv_heads) * arch.head_dim)
    # vLLM's profiling run: activations of max_num_batched_tokens tokens and the sampler's fp32 logits.
    reserve = int(batched * 2 * (4 * arch.hidden + widest / tp) + (seqs or 256) * arch.vocab / tp * 4) + ROLLOUT_RESERVE_BYTES
    budget = int(util * device.memory_bytes) - weights - reserve
    request = _v(job, "data.max_prompt_length") + _v(job, "data.max_response_length")
    max_len = _v(job, f"{RO}.max_model_len") or job.model.max_position_embeddings or request
    concurrent = max(0, budget) // (per_token * request) if request else 0
    replicas = None
    world = job.cluster.world
    if world.known and tp * dp:
        replicas = world.value // (tp * dp)
    per_replica = None
    try:
        total = _v(job, "data.train_batch_size") * _v(job, f"{RO}.n")
        per_replica = math.ceil(total / replicas) if replicas else None
    except Unknown:
        per_replica = None
    return RolloutMemory(engine, tp, dp, ep, replicas, weights, per_token, budget, reserve, request, max_len,
                         concurrent, seqs, per_replica, 0, replicated)


def _resident(job: Job, train: TrainMemory) -> int:
    """Training state left on the device while the rollout engine generates."""
    worst = max(train.stages, key=lambda s: s.total)
    b = worst.bytes
    kept = 0
    if not job.value(f"{M}.param_offload").value:
        kept += b["weights"] + b["grads"]
    if not job.value(f"{M}.optimizer_offload").value:
        kept += b["optimizer"]
    return kept + b["ref_weights"]


def _host(job: Job, train: TrainMemory) -> HostMemory:
    worst = max(train.stages, key=lambda s: s.total)
    b = worst.bytes
    terms, moved = [], 0
    if job.value(f"{M}.param_offload").value:
        moved += b["weights"] + b["grads"]
        terms.append("weights and grads (actor.megatron.param_offload)")
    if job.value(f"{M}.optimizer_offload").value:
        moved += b["optimizer"]
        terms.append("optimizer states (actor.megatron.optimizer_offload)")
    if b["optimizer_host"]:
        moved += b["optimizer_host"]
        terms.append("optimizer_offload_fraction of the optimizer states (Megatron's optimizer_cpu_offload)")
    per_node = job.cluster.devices_per_node
    n = per_node.value if per_node.known else None
    return HostMemory(moved, n, moved * n if n else None, terms)
