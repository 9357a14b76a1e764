"""Per-device memory of a Megatron job (verl, Megatron-LM, slime): each pipeline stage's training peak,
the rollout, the host. Each framework's settings come from its adapter
(frameworks/<name>/memory_settings.py); the terms below are verl's, and
the adapters' docstrings say where Megatron-LM and slime differ (dtype flags, one fp32 logits buffer,
slime's offload and SGLang's ``mem_fraction_static``, which already leaves out activations).

What each term is (the sources are in the modules that compute them, and in ``TERMS`` for ``--explain``):
- weights: parameters (memory/params.py, exact) × the engine dtype (verl ``megatron.dtype``, bf16);
- grads: Megatron DDP's ``main_grad`` buffer over all local parameters, fp32 unless the precision-aware
  optimizer is on with a 16-bit ``main_grads_dtype`` (verl/workers/engine/megatron/transformer_impl.py
  sets ``grad_reduce_in_fp32 = not use_low_precision_main_grads``);
- optimizer: Adam's fp32 master weights + ``exp_avg`` + ``exp_avg_sq`` (their dtypes from verl's optim
  config); the distributed optimizer shards dense state over DP·CP and expert state over EDP
  (megatron/core/optimizer/distrib_optimizer.py, one shard per rank of the data-parallel group with CP);
  Megatron's ``optimizer_cpu_offload`` moves the moments of ``optimizer_offload_fraction`` of it to the host (and
  their fp32 master with the precision-aware optimizer; frameworks/memory_settings.py ``hybrid_offload``);
- activations: memory/activations.py per layer, times the micro batches a stage holds under 1F1B
  (pipeline stage s keeps ``min(PP - s, micro batches)``; with interleaving, Megatron-Core's warm-up
  ``(PP - s - 1)·2 + (VPP - 1)·PP`` plus one chunk, megatron/core/pipeline_parallel/schedules.py
  ``get_pp_rank_microbatches``);
- logits (last stage): one micro batch's vocab-parallel logits in bf16, the fp32 copy and gradient of
  the log-softmax (verl/utils/megatron/tensor_parallel.py ``vocab_parallel_log_probs_from_logits``), and
  the entropy's two fp32 tensors when the entropy is computed (per chunk with
  ``entropy_from_logits_with_chunking``);
- workspace: the step's transient tensors beyond saved activations (memory/overhead.py);
- ``allocated`` (torch.cuda.max_memory_allocated) is the sum of the terms; ``total`` (the device peak) adds the
  caching allocator's fragmentation and what lives outside it (memory/overhead.py, sourced there).
verl's ``param_offload`` / ``optimizer_offload`` move state to the host between phases; during the
update it is back on the device, so they change the rollout phase and the host, not the training peak.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from shardcheck.frameworks.interface import MEMORY_FRAMEWORKS, framework_module
from shardcheck.frameworks.megatron.layout_string import LayoutStringError, RankLayout, parse_layout
from shardcheck.frameworks.megatron.pipeline import Split, split_layers, stage_chunk_layer_indices
from shardcheck.frameworks.memory_settings import Kernels, RolloutSettings, SettingNotModelled, TrainSettings, known
from shardcheck.job import Job, MegatronLayout
from shardcheck.memory.activations import Parallel, Recompute, layer_bytes, mtp_bytes, offloaded_bytes
from shardcheck.memory.devices import GIB, Device, device_for
from shardcheck.memory.overhead import device_total, transient_bytes
from shardcheck.memory.params import Sharding, StageParams, layer_params, lora_params, padded_vocab, stage_params
from shardcheck.models.architecture import Architecture, NotModelled, architecture
from shardcheck.origin import UnknownValue

ROLLOUT_RESERVE_BYTES = 1 * GIB  # vLLM's CUDA graphs and NCCL, outside its profiled activations
FP8_WEIGHT_BYTES = 1  # Transformer Engine Float8Tensor data
# Transformer Engine FP8 recipes (megatron-core 0.16.1 transformer_config.py ``fp8_recipe``, default "delayed";
# Megatron-LM's --fp8-recipe is generated from it): the bytes per element of a linear layer's input saved for
# backward (``Kernels.fp8_bytes``, memory/activations.py ``fp8_layer_delta``). TE 2.17.1
# (NVIDIA/TransformerEngine@4329ff84) transformer_engine/pytorch/tensor/: delayed and per-tensor current scaling
# ("tensorwise") keep 1-byte data and one fp32 scale per tensor (Float8Tensor); MXFP8 one E8M0 byte per 32
# elements (MXFP8Tensor); "blockwise" one fp32 scale per 1×128 block of an activation (Float8BlockwiseQTensor).
FP8_SAVED_BYTES = {"delayed": 1.0, "tensorwise": 1.0, "mxfp8": 1 + 1 / 32, "blockwise": 1 + 4 / 128}
FUSED_CHUNK_TOKENS = 4096  # tokens per chunk shardcheck allows a fused linear + cross-entropy


@dataclass
class StageMemory:
    stage: int
    ranks: list[int]  # the pipeline ranks with these figures
    layers: int
    params: StageParams
    bytes: dict[str, int]
    micro_batches_in_flight: int
    critic_at_startup: int = 0  # the colocated critic's bytes on this device before its first update

    @property
    def total(self) -> int:
        return self.bytes["total"]

    def ranks_text(self, sep: str = ",") -> str:
        """The pipeline ranks of this row: "3", "1–14", or a list joined by ``sep``."""
        r = self.ranks
        if len(r) == 1:
            return str(r[0])
        return f"{r[0]}–{r[-1]}" if r == list(range(r[0], r[-1] + 1)) else sep.join(map(str, r))


@dataclass
class TrainMemory:
    stages: list[StageMemory]
    tokens_per_micro_batch: int
    sequence_length: int
    static_bytes_max: int  # weights + grads + optimizer of the largest stage (exact, not estimated)
    batch_bound: str | None = None  # dynamic batch size: which sample-length bound sized the micro batch


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
    requests_per_replica: int | None  # the step's requests spread over the replicas
    kv_replicated: bool
    training_resident_bytes: int = 0  # training state left on the device during generation
    # training state on the device when the engine starts (before the first update), and what it is made of
    startup_resident_bytes: int = 0
    startup_terms: tuple[str, ...] = ()
    training_resident_terms: tuple[str, ...] = ()  # what training_resident_bytes is made of
    # False when the checkpoint is quantized (config.json quantization_config): the engine may load fewer
    # bytes per parameter than the rollout dtype, so the weights (and the budget) are estimates
    weights_exact: bool = True
    # Gated DeltaNet layers: the recurrent state one request holds on a device, whatever its length
    state_bytes_per_request: int = 0

    @property
    def request_bytes(self) -> int:
        """One full-length request's KV cache and recurrent state on one device."""
        return self.kv_bytes_per_token * self.request_tokens + self.state_bytes_per_request

    @property
    def concurrent_per_replica(self) -> int:
        return self.max_concurrent_full_requests * self.dp

    @property
    def requests_per_engine(self) -> int | None:
        return -(-self.requests_per_replica // self.dp) if self.requests_per_replica is not None else None


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
    problem_origins: dict = field(default_factory=dict)  # problem -> the Origin of the value that stopped it
    # settings of the job the estimate does not model (MEM-NOT-MODELLED), as (key, line): a stopped part's
    # reason, or a part left out of a figure that is given (CUDA graphs)
    not_modelled: list[tuple[str, str]] = field(default_factory=list)
    # with --sample-tokens and dynamic batch size: the update sized at the token budget (the upper bound);
    # ``train`` (what the rules judge) is sized at the given sample lengths
    train_at_budget: TrainMemory | None = None
    critic_train: TrainMemory | None = None  # the colocated critic's own update phase (verl)
    # why the job's rollout engine could not be sized (None: sized, or the job has no rollout engine)
    rollout_problem: str | None = None
    train_settings: TrainSettings | None = field(default=None, repr=False)  # what ``train`` was sized with


def adapter_for(job: Job):
    """The framework adapter that reads this job's settings (frameworks/<name>/memory_settings.py)."""
    adapter = framework_module(job.framework, "memory_settings")
    if adapter is None:
        raise UnknownValue(
            f"the memory estimate reads {', '.join(MEMORY_FRAMEWORKS)} jobs; {job.framework} settings are not read"
        )
    return adapter


def _stopped_at(out: MemoryEstimate, said: str, exc: Exception) -> None:
    """Keep where the value that stopped a part of the estimate was written (verdict.py names its line)."""
    traced = getattr(exc, "traced", None)
    origin = traced.origin if traced is not None else getattr(exc, "origin", None)
    if origin is not None:
        out.problem_origins[said] = origin


def estimate(job: Job, device_choice: str | None = None, *, train_of: MemoryEstimate | None = None) -> MemoryEstimate:
    """The memory estimate of ``job`` on ``device_choice`` (else the default for trainer.device).

    ``train_of``: the estimate of a job that differs from this one only in its rollout engine's sizes, which
    the training phase does not read; its training part is taken as it is (the planner's rollout layouts;
    tests/test_plan.py compares it with estimating anew)."""
    kind = job.cluster.device.value if job.cluster.device.known else None
    device = device_for(device_choice, kind, job.cluster_keys[2])
    out = MemoryEstimate(job.path, device)
    if job.model is None:
        out.problems.append(f"no model facts: {job.model_problem or 'model not found'}")
        return out
    try:
        arch = architecture(job.model)
        adapter = adapter_for(job)
    except (NotModelled, UnknownValue) as exc:
        said = f"parameter counts unknown: {exc}" if isinstance(exc, NotModelled) else str(exc)
        out.problems.append(said)
        _stopped_at(out, said, exc)
        return out
    layout = job.layout("actor")
    fsdp = job.fsdp_layout("actor")
    settings: TrainSettings | None = None
    reused = train_of is not None and train_of.train is not None and train_of.train_settings is not None
    try:
        if reused:
            out.train, settings = train_of.train, train_of.train_settings
            out.train_at_budget = train_of.train_at_budget
        elif layout is not None:
            out.train, settings = _train(job, arch, layout, adapter, device)
        elif fsdp is not None and hasattr(adapter, "fsdp_train_settings"):
            out.train, settings = _train_fsdp(job, arch, fsdp, adapter)
        else:
            out.problems.append("no training engine shardcheck models (Megatron or FSDP)")
    except UnknownValue as exc:
        out.problems.append(f"train: {exc}")
        _stopped_at(out, f"train: {exc}", exc)
        if isinstance(exc, SettingNotModelled):
            out.not_modelled.append((exc.key, str(exc)))
    out.train_settings = settings
    if settings is not None:
        out.not_modelled += settings.not_modelled
    if out.train is not None and out.train.batch_bound and job.sample_tokens is not None and not reused:
        bound_job = replace(job, sample_tokens=None)
        try:
            out.train_at_budget = (
                _train(bound_job, arch, layout, adapter, device)
                if layout is not None
                else _train_fsdp(bound_job, arch, fsdp, adapter)
            )[0]
        except UnknownValue:
            pass
    try:
        rollout = adapter.rollout_settings(job, bool(arch.experts), job.model.max_position_embeddings)
        out.rollout = _rollout(arch, rollout, device) if rollout is not None else None  # None: no rollout engine
    except UnknownValue as exc:
        out.rollout_problem = str(exc)
        out.problems.append(f"rollout: {exc}")
        _stopped_at(out, f"rollout: {exc}", exc)
    if out.train is not None:
        _add_critic(job, arch, out, adapter, settings)
        out.host = _host(job, out.train, settings)
        if out.rollout is not None and rollout.colocated:
            out.rollout.training_resident_bytes, out.rollout.training_resident_terms = _resident(out.train, settings)
            out.rollout.startup_resident_bytes, out.rollout.startup_terms = _at_startup(
                out.train, settings, megatron=layout is not None
            )
    return out


def _sharding(layout: MegatronLayout) -> Sharding:
    return Sharding(
        tp=known(layout.tp, "TP"), ep=known(layout.ep, "EP"), etp=known(layout.etp, "ETP"), pp=known(layout.pp, "PP")
    )


def _check_shards(arch: Architecture, s: Sharding, what: str) -> None:
    """Counts per device are only defined for a layout the framework accepts (the layout rules say why not)."""
    splits = [("attention heads", arch.heads, s.tp), ("vocab", padded_vocab(arch.vocab, s), s.tp)]
    if arch.experts:
        splits += [("experts", arch.experts, s.ep), ("expert FFN", arch.moe_ffn, s.etp)]
    if arch.ffn:
        splits.append(("FFN", arch.ffn, s.tp))
    if arch.linear is not None and arch.linear_layers:  # TransformerConfig.__post_init__ asserts both
        splits += [
            ("Gated DeltaNet key heads", arch.linear.key_heads, s.tp),
            ("Gated DeltaNet value heads", arch.linear.value_heads, s.tp),
        ]
    bad = [f"{name} {n} over {k}" for name, n, k in splits if not k or n % k]
    if bad:
        raise UnknownValue(
            f"the {what} layout does not split the model evenly ({', '.join(bad)}); fix the layout first"
        )


def _split(layout: MegatronLayout, arch: Architecture, mtp: int) -> list[RankLayout]:
    """What each pipeline rank builds: a layout string's parts, else Megatron-Core's split (MTP on the last)."""
    pp = known(layout.pp, "PP")
    if pp > 4096 or arch.num_layers > (1 << 20):
        raise UnknownValue(
            f"PP {pp} and {arch.num_layers} layers are past the 4096 stages and 2**20 layers "
            "shardcheck sizes one by one"
        )
    text = known(layout.layout_string, "pipeline_model_parallel_layout")
    if text:
        try:
            ranks = parse_layout(str(text), pp, arch.num_layers)
        except LayoutStringError as exc:
            raise UnknownValue(f"pipeline_model_parallel_layout {text!r}: {exc}") from None
        if sum(r.mtp_layers for r in ranks) != mtp:
            raise UnknownValue(
                f"pipeline_model_parallel_layout {text!r} places {sum(r.mtp_layers for r in ranks)} "
                f"MTP layers, --mtp-num-layers is {mtp}"
            )
        return ranks
    vpp = known(layout.vpp, "VPP")
    emb, loss = (
        bool(known(layout.account_for_embedding, "account_for_embedding")),
        bool(known(layout.account_for_loss, "account_for_loss")),
    )
    split = split_layers(
        arch.num_layers,
        pp,
        first=known(layout.first_stage_layers, "first stage layers"),
        last=known(layout.last_stage_layers, "last stage layers"),
        vpp=vpp,
        account_for_embedding=emb,
        account_for_loss=loss,
    )
    if not isinstance(split, Split):
        raise UnknownValue(f'the layer split fails (megatron-core: "{split.message}"); fix the layout first')
    try:
        chunks = stage_chunk_layer_indices(
            split, arch.num_layers, vpp=vpp, account_for_embedding=emb, account_for_loss=loss
        )
    except ValueError as exc:  # a split the layout rules reject (e.g. first-stage layers with PP 1)
        raise UnknownValue(f"{exc}; fix the layout first") from None
    # MTP sits after the decoder on the last stage (its last chunk)
    return [
        RankLayout(
            c,
            tuple(mtp if stage == pp - 1 and i == len(c) - 1 else 0 for i in range(len(c))),
            stage == 0,
            stage == pp - 1,
        )
        for stage, c in enumerate(chunks)
    ]


def _in_flight(
    stage: int, pp: int, chunks: int, micro_batches: int, group: int | None, cost: list[float]
) -> tuple[list[int], int]:
    """How many micro batches of each virtual chunk a stage holds at its peak, and how many in all.

    megatron-core 0.16.1 megatron/core/pipeline_parallel/schedules.py: without interleaving, stage s runs
    ``min(PP - s - 1, micro batches)`` warm-up forwards, then one forward and one backward at a time, so it
    holds ``PP - s`` micro batches. Interleaved (``get_schedule_table``): forwards go in groups of
    ``microbatch_group_size_per_vp_stage`` (default PP) micro batches through chunk 0, 1, …; backwards in the
    same order with the chunks reversed; ``get_pp_rank_microbatches`` warms up with
    ``(PP - s - 1)·2 + (VPP - 1)·group`` forwards. The peak is the largest sum of ``cost`` (bytes per micro
    batch of each chunk) over the 1F1B steady state.
    """
    if chunks == 1:
        held = min(pp - stage, micro_batches)
        return [held], held
    group = group or pp
    # The order repeats with period chunks·group (whole groups), and so do the held counts between the warm-up
    # and the last groups: a long run visits the states a shorter one with the same last, partial group does
    # (warm-up, a few periods, the same tail). Simulate that one (a hostile --global-batch-size must not cost a
    # list of its size; tests/test_hostile.py compares it with listing every micro batch).
    enough = group * (2 * pp + 2 * chunks + 4)
    if micro_batches > enough + group:
        micro_batches = enough + micro_batches % group
    order = [
        c
        for lo in range(0, micro_batches, group)
        for c in range(chunks)
        for _ in range(lo, min(lo + group, micro_batches))
    ]
    backward = [chunks - 1 - c for c in order]
    total = len(order)
    warmup = min((pp - stage - 1) * 2 + (chunks - 1) * group, total)
    counts = [0] * chunks
    for c in order[:warmup]:
        counts[c] += 1
    best, best_counts = -1.0, list(counts)
    for j in range(total - warmup + 1):
        if warmup + j < total or j == 0:
            if warmup + j < total:
                counts[order[warmup + j]] += 1
            value = sum(n * b for n, b in zip(counts, cost))
            if value > best:
                best, best_counts = value, list(counts)
        if j < total:
            counts[backward[j]] -= 1
    return best_counts, sum(best_counts)


def _per_kind(arch: Architecture, layers, value) -> dict[int, float]:
    """``{i: value(i)}`` for the ``layers``, calling ``value`` once per layer kind (MoE or dense, attention or
    Gated DeltaNet): the per-layer functions of memory/activations.py read the index only through
    ``arch.layer_kind``."""
    by_kind: dict[tuple[bool, bool], float] = {}
    out = {}
    for i in layers:
        kind = arch.layer_kind(i)
        if kind not in by_kind:
            by_kind[kind] = value(i)
        out[i] = by_kind[kind]
    return out


def _activations(
    arch: Architecture, rank: RankLayout, tokens: int, seq: int, p: Parallel, settings: TrainSettings
) -> tuple[list[float], float]:
    """(bytes one micro batch keeps in each virtual chunk of this stage, bytes held once: the recompute in
    progress in backward, and with fine-grained offload the offloaded tensors of the one layer computing)."""
    rc, k = settings.recompute, settings.kernels
    layers = rank.decoder_layers
    # a layer's bytes depend on its index only through its kind (MoE or dense): one call per kind
    per = _per_kind(arch, layers, lambda i: layer_bytes(arch, i, tokens, seq, p, rc, k))
    once = _selective_working(arch, layers, per, tokens, seq, p, settings)
    if settings.offload_modules and per:
        # every layer's listed modules' saved tensors go to the host; the layer computing keeps its own
        off = {
            i: min(b, offloaded_bytes(arch, i, tokens, seq, p, settings.offload_modules, k, rc)) for i, b in per.items()
        }
        per = {i: b - off[i] for i, b in per.items()}
        once += max(off.values())
    one_mtp = mtp_bytes(arch, tokens, seq, p, rc, k)
    if settings.offload_modules:  # the MTP depth's transformer layer offloads as the decoder's do
        one_mtp -= offloaded_bytes(arch, arch.num_layers - 1, tokens, seq, p, settings.offload_modules, k, rc)
    if rc.granularity != "full" or not per:
        return [sum(per[i] for i in c) + m * one_mtp for c, m in zip(rank.chunk_layers, rank.chunk_mtp)], once
    full = _per_kind(arch, layers, lambda i: layer_bytes(arch, i, tokens, seq, p, Recompute(), k))
    n = max(1, rc.num_layers or 1)
    out, working = [], 0.0
    for chunk, m in zip(rank.chunk_layers, rank.chunk_mtp):
        if not chunk:
            out.append(m * one_mtp)
            continue
        if rc.method == "block":
            # the first n layers of the chunk keep only their inputs (recomputed one at a time); the rest keep all
            out.append(sum(per[i] for i in chunk[:n]) + sum(full[i] for i in chunk[n:]) + m * one_mtp)
            working = max(working, max(full[i] for i in chunk[:n]))
        else:
            # uniform: the input of each group of n layers is kept; backward recomputes one group at a time
            out.append(sum(per[i] for i in chunk[::n]) + m * one_mtp)
            working = max(working, max(sum(full[i] for i in chunk[j : j + n]) for j in range(0, len(chunk), n)))
    return out, once + working


def _selective_working(arch: Architecture, layers, per: dict, tokens: int, seq: int, p: Parallel, settings) -> float:
    """Selective recompute's working set: the layer in backward re-creates what a recomputed module dropped, so
    the stage saves the held layers' bytes less what one module of one layer brings back at the peak.

    megatron-core 0.16.1: ``core_attn``, ``mlp`` and ``moe`` run under ``tensor_parallel.checkpoint``
    (megatron/core/tensor_parallel/random.py ``CheckpointFunction.backward`` reruns the forward and keeps its
    outputs until that module's backward is done); ``layernorm``, ``moe_act`` and ``mla_up_proj`` under
    ``CheckpointWithoutOutput`` (same file: ``_recompute`` refills the discarded output when the consumer's
    backward starts, and it is freed with the consumer's inputs). A layer's backward visits its modules one
    after another (MLP side, then attention), so the largest single module's bytes count."""
    rc = settings.recompute
    if rc.granularity != "selective" or not per:
        return 0.0
    k = settings.kernels
    kept = _per_kind(arch, layers, lambda i: layer_bytes(arch, i, tokens, seq, p, Recompute(), k))
    most = 0.0
    for module in sorted(rc.modules):
        alone = Recompute("selective", modules=frozenset({module}))
        one = _per_kind(arch, layers, lambda i, r=alone: layer_bytes(arch, i, tokens, seq, p, r, k))
        most = max(most, max(kept[i] - one[i] for i in per))
    return most


def _add_critic(job: Job, arch: Architecture, out: MemoryEstimate, adapter, settings: TrainSettings) -> None:
    """The colocated critic: its state on the device during the actor's update (unless offloaded), and its
    own update phase (``out.critic_train``).

    verl's critic is the actor's network with a one-output value head, built with the same parallel
    sizes (VERL-MC-ONE-INIT warns when they differ), so its weights, grads and optimizer state per
    device are the actor's, less the output layer, plus the head; each part stays unless the critic's
    param_offload / optimizer_offload moves it to the host. verl runs the critic's update and the actor's
    one after the other (verl/trainer/ppo/ray_trainer.py: ``_update_critic`` then ``_update_actor``); during
    the critic's, its own state is on the device with its activations (its micro batches:
    ``critic.ppo_micro_batch_size_per_gpu`` × sequence, or ``critic.ppo_max_token_len_per_gpu`` × CP with
    dynamic batch size; activations scale with the tokens of a micro batch under flash attention), its
    value head's output instead of the vocabulary logits, and the actor's state unless the actor offloads it.
    """
    if not hasattr(adapter, "critic_settings"):
        return
    try:
        critic = adapter.critic_settings(job)
    except UnknownValue as exc:
        out.problems.append(f"critic: {exc}")
        return
    if critic is None:
        return
    if settings.lora is not None:
        # the critic's state is sized as a share of the actor's, which a LoRA actor does not train in full
        out.problems.append("critic: beside a LoRA actor, the critic's state is not sized")
        return
    layout = job.layout("actor")
    if layout is not None:
        last, shard = known(layout.pp, "PP") - 1, 1  # the head sits on the last stage, replicated over TP
    else:
        last, shard = 0, known(job.fsdp_layout("actor").shard(job.cluster.world), "FSDP shard group")
    phase: list[StageMemory] = []
    for s in out.train.stages:
        p = s.params
        if not p.total:
            continue
        head = -(-arch.hidden // shard) if last in s.ranks else 0
        share = (p.total - p.output + head) / p.total
        b = s.bytes
        if critic.tokens_per_micro_batch:
            phase.append(
                _critic_stage(s, share, critic.tokens_per_micro_batch / out.train.tokens_per_micro_batch, settings)
            )
        kept = (b["weights"] + b["grads"] if critic.keeps_params else 0) + (
            b["optimizer"] if critic.keeps_optimizer else 0
        )
        b["critic_state"] = int(kept * share)
        built = (
            _built_state(b, settings, critic.keeps_params, critic.keeps_optimizer)
            if critic.engine == "megatron"
            else b["weights"] * critic.keeps_params  # FSDP: grads and AdamW state appear at the first step
        )
        s.critic_at_startup = int(built * share)
        b["allocated"] += b["critic_state"]
        b["total"] = device_total(b)
    if phase:
        out.critic_train = TrainMemory(
            phase,
            critic.tokens_per_micro_batch,
            out.train.sequence_length,
            max(r.bytes["weights"] + r.bytes["grads"] + r.bytes["optimizer"] for r in phase),
        )
    else:
        out.problems.append("critic update: the critic's tokens per micro batch are unknown")


def _critic_stage(actor: StageMemory, share: float, token_ratio: float, settings: TrainSettings) -> StageMemory:
    """One stage of the critic's update: its state, its activations, the actor's state left on the device."""
    b = actor.bytes
    kept = 0 if settings.param_offload else b["weights"] + b["grads"]
    kept += 0 if settings.optimizer_offload else b["optimizer"]
    terms = {
        "weights": int(b["weights"] * share),
        "grads": int(b["grads"] * share),
        "optimizer": int(b["optimizer"] * share),
        "optimizer_host": int(b["optimizer_host"] * share),
        "gathered": b["gathered"],
        "activations": int(b["activations"] * token_ratio),
        "logits": 0,  # the value head's one output per token
        "ref_weights": b["ref_weights"],
        "actor_state": kept,
        "workspace": int(b["workspace"] * max(1.0, token_ratio)),
    }
    return StageMemory(
        actor.stage, list(actor.ranks), actor.layers, actor.params, _totals(terms), actor.micro_batches_in_flight
    )


def _peak(terms: dict[str, int]) -> int:
    """The allocated peak: every term but the optimizer share Megatron keeps on the host (and the totals)."""
    return sum(v for k, v in terms.items() if k not in ("optimizer_host", "allocated", "total"))


def _logits(arch: Architecture, tokens: int, tp: int, cp: int, settings: TrainSettings, mtp: int = 0) -> int:
    """One micro batch's logits on the last stage (vocab-parallel over TP, sequence split over CP); each MTP
    depth's loss keeps its fp32 buffers for backward too (its 16-bit logits are freed when its loss is taken:
    megatron/core/transformer/multi_token_prediction.py ``process_mtp_loss``)."""
    rows = tokens / cp
    fp32 = rows * arch.vocab / tp * 4 * settings.logits.fp32_buffers
    if settings.logits.fused:
        fused = min(FUSED_CHUNK_TOKENS, rows) * arch.vocab / tp * (4 + 4)  # one fp32 chunk and its gradient
        return int(min(fused, rows * arch.vocab / tp * 2 + fp32) * (1 + mtp))
    # bf16 logits and the adapter's fp32 buffers (verl: the log-softmax and its gradient)
    out = rows * arch.vocab / tp * (2 + 4 * settings.logits.fp32_transient) + fp32 * (1 + mtp)
    if settings.logits.entropy:
        chunk = min(settings.logits.entropy_chunk or rows, rows)
        out += 2 * 4 * chunk * arch.vocab / tp
    return int(out)


def _train(
    job: Job, arch: Architecture, layout: MegatronLayout, adapter, device: Device | None = None
) -> tuple[TrainMemory, TrainSettings]:
    sharding = _sharding(layout)
    dp = known(layout.dp(job.cluster.world), "DP")
    edp = known(layout.edp(job.cluster.world), "EDP")
    if not dp or not edp:
        raise UnknownValue("the layout does not tile the world (see the MCORE-PS findings); fix the layout first")
    cp = known(layout.cp, "CP")
    settings = adapter.train_settings(job, layout, dp)
    settings = replace(settings, kernels=replace(settings.kernels, moe_probs_at_combine=_probs_at_combine(job)))
    kernels, fp8_weight_extra = fp8_kernels(settings, device)
    if kernels is not settings.kernels:
        settings = replace(settings, kernels=kernels)
    if settings.vocab_divisible_by:
        sharding = Sharding(sharding.tp, sharding.ep, sharding.etp, sharding.pp, settings.vocab_divisible_by)
    _check_shards(arch, sharding, "training")
    ranks = _split(layout, arch, settings.mtp_layers)
    sp = bool(known(layout.sequence_parallel, "sequence_parallel")) and sharding.tp > 1
    p = Parallel(tp=sharding.tp, sequence_parallel=sp, cp=cp, ep=sharding.ep, etp=sharding.etp)
    tokens, seq = settings.tokens_per_micro_batch, settings.sequence_length
    shards = (dp * cp, edp) if settings.distributed_optimizer or settings.fsdp_sharding else (1, 1)
    rows: list[StageMemory] = []
    for stage, rank in enumerate(ranks):
        layers = rank.decoder_layers
        params = stage_params(
            arch, layers, stage, sharding, embedding=rank.embedding, loss=rank.loss, mtp=rank.mtp_layers
        )
        trained = _trained(arch, layers, params, sharding, settings)
        dense = trained.embedding + trained.dense + trained.output
        opt = (dense / shards[0] + trained.expert / shards[1]) * settings.state_bytes
        per_chunk, once = _activations(arch, rank, tokens, seq, p, settings)
        counts, held = _in_flight(
            stage, sharding.pp, rank.chunks, settings.micro_batches, settings.microbatch_group, per_chunk
        )
        weights, grads = _weights_and_grads(arch, layers, params, sharding, settings, shards)
        # Transformer Engine's FP8 weight copies (fp8_kernels): the layers' linear weights, whole on every device
        # (the embedding and the bf16 output layer have none; norms and the router are counted with them)
        weights += int((params.dense + params.expert) * fp8_weight_extra)
        if trained is not params:  # LoRA: the base keeps its weights; only the adapters have gradient buffers
            adapter_weights, grads = _weights_and_grads(arch, layers, trained, sharding, settings, shards)
            weights += adapter_weights
        terms = {
            "weights": weights,
            "grads": grads,
            "optimizer": int(opt * settings.optimizer_on_device),
            "optimizer_host": int(opt * _host_share(settings)),
            "gathered": _fsdp_gathered(arch, layers, sharding, settings),
            "activations": int(sum(n * b for n, b in zip(counts, per_chunk)) + once),
            # the main model's logits and each MTP depth's, all kept until backward
            "logits": _logits(arch, tokens, sharding.tp, cp, settings, rank.mtp_layers) if rank.loss else 0,
            "ref_weights": params.total * settings.weight_bytes if settings.ref_on_device else 0,
        }
        terms["workspace"] = transient_bytes(arch, tokens, p, settings)
        rows.append(StageMemory(stage, [stage], len(layers), params, _totals(terms), held))
    merged: list[StageMemory] = []
    for row in rows:
        same = next((m for m in merged if m.bytes == row.bytes and m.params == row.params), None)
        if same is not None:
            same.ranks.append(row.stage)
        else:
            merged.append(row)
    static = max(r.bytes["weights"] + r.bytes["grads"] + r.bytes["optimizer"] for r in rows)
    return TrainMemory(merged, tokens, seq, static, settings.batch_bound), settings


def _host_share(settings: TrainSettings) -> float:
    """The optimizer's host bytes as a share of its state (Megatron's optimizer CPU offload)."""
    if settings.optimizer_host_share is not None:
        return settings.optimizer_host_share
    return 1 - settings.optimizer_on_device


def _probs_at_combine(job: Job) -> bool:
    """Whether the job's megatron-core weights the experts' outputs in the token unpermutation (before
    core_v0.12; memory/activations.py), keeping them for backward."""
    from shardcheck.frameworks.megatron.versions import as_tuple

    return as_tuple(job.megatron_core_version) < (0, 12)


def _trained(arch: Architecture, layers, params: StageParams, sharding: Sharding, settings: TrainSettings):
    """The parameters one device trains (gradients, optimizer state): all of them, or with LoRA the adapters
    only (memory/params.py ``lora_params``; Megatron's DDP makes gradient buffers only for parameters that
    require grad, megatron/core/distributed/distributed_data_parallel.py, and the optimizer steps only those)."""
    if settings.lora is None:
        return params
    lora = settings.lora
    return lora_params(arch, tuple(layers), sharding, lora.rank, lora.modules, lora.fused)


def _weights_and_grads(
    arch: Architecture,
    layers,
    params: StageParams,
    sharding: Sharding,
    settings: TrainSettings,
    shards: tuple[int, int],
) -> tuple[int, int]:
    """Weights and gradient buffers on one device: Megatron DDP keeps them whole; Megatron-FSDP shards the
    gradients (optim_grads) and the parameters too (optim_grads_params) over DP·CP (experts over EDP);
    ``--fp8-param-gather`` keeps the compute weights as Transformer Engine's Float8Tensor, 1 byte per parameter
    instead of the 16-bit copy (megatron/core/fp8_utils.py; the fp32 main copy stays in the distributed
    optimizer). Transformer Engine's FP8 weight copies and transposes are added by the caller (``fp8_kernels``)."""
    weight_bytes = FP8_WEIGHT_BYTES if settings.fp8_params else settings.weight_bytes
    dense = params.embedding + params.dense + params.output
    whole = (dense, params.expert)
    split = (dense / shards[0], params.expert / shards[1])
    w = split if settings.fsdp_sharding == "optim_grads_params" else whole
    g = split if settings.fsdp_sharding in ("optim_grads", "optim_grads_params") else whole
    return int(sum(w) * weight_bytes), int(sum(g) * settings.grad_bytes)


def _non_tn_fp8_gemm(device: Device | None) -> bool:
    """Whether cuBLAS takes FP8 operands in other layouts than TN on ``device``: TE 2.17.1
    transformer_engine/pytorch/utils.py ``is_non_tn_fp8_gemm_supported`` (compute capability 10.x, 11.x, ≥ 13).
    Elsewhere (Hopper, Ada) a delayed / per-tensor FP8 tensor used column-wise carries a second, transposed copy.
    Unknown devices are sized with the transposes (the larger figure)."""
    cc = device.compute_capability if device is not None else None
    if not cc:
        return False
    major = int(cc.split(".")[0])
    return 10 <= major < 12 or major >= 13


def fp8_kernels(settings: TrainSettings, device: Device | None) -> tuple[Kernels, float]:
    """The layer kernels with Transformer Engine's FP8 GEMMs applied, and the bytes per linear-layer parameter
    of the FP8 weight copies beyond the ``weights`` term's (``--fp8-param-gather`` counts 1 byte already).

    Weights (TE 2.17.1 module/base.py ``quantize_weight``, linear.py / layernorm_linear.py / grouped_linear.py):
    with bf16 parameters each linear layer quantizes its weight into a workspace cached in the module across
    micro batches and steps (megatron-core passes ``is_first_microbatch``, extensions/transformer_engine.py, so
    ``cache_weight`` is on), for the forward GEMM (row-wise) and the backward's data-gradient GEMM (column-wise):
    delayed / per-tensor scaling 1 byte plus the transposed byte where the GPU needs TN layouts (above), MXFP8
    both usages with their scales (2·(1 + 1/32)), blockwise both usages (2; 128×128-block scales). With FP8
    parameters (``--fp8-param-gather``) the parameter is the quantized tensor; what is added is its column-wise
    copy: megatron-core's ``post_all_gather_processing`` (TE tensor/utils.py) creates the transpose of a
    Float8Tensor where the GPU needs it and the column-wise data of a Float8BlockwiseQTensor; an MXFP8Tensor keeps
    both usages. The amax / scale buffers (a few fp32 per GEMM) are not counted.
    Recipes other than these four ("custom") are reported unknown. Not modelled: ``first_last_layers_bf16`` (its
    few bf16 layers are sized as FP8 ones; Megatron-Bridge's performance configs turn it off,
    scripts/performance/utils/precision.py), and Megatron-FSDP's handling of the weight caches (counted whole)."""
    k = settings.kernels
    if settings.fp8 is None:
        return k, 0.0
    recipe = str(settings.fp8_recipe or "delayed").lower()
    if recipe not in FP8_SAVED_BYTES:
        raise UnknownValue(
            f"fp8 recipe {settings.fp8_recipe!r}: what Transformer Engine saves for backward under it is not "
            f"modelled (known: {', '.join(FP8_SAVED_BYTES)})"
        )
    transpose = 0.0 if _non_tn_fp8_gemm(device) else 1.0
    if recipe == "mxfp8":
        columnwise, rowwise = 1 + 1 / 32, 1 + 1 / 32
    elif recipe == "blockwise":
        columnwise, rowwise = 1.0, 1.0
    else:
        columnwise, rowwise = transpose, 1.0
    weight_extra = columnwise if settings.fp8_params else rowwise + columnwise
    kernels = replace(
        k,
        fp8_bytes=FP8_SAVED_BYTES[recipe],
        fp8_delayed=recipe == "delayed",
        fp8_fc1_offloaded="expert_fc1" in settings.offload_modules,
    )
    return kernels, weight_extra


def _fsdp_gathered(arch: Architecture, layers, sharding: Sharding, settings: TrainSettings) -> int:
    """Megatron-FSDP with sharded parameters: the unsharded 16-bit weights of the layer computing and the one
    prefetched, and that layer's unsharded gradient before its reduce-scatter
    (megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py: per-module buckets)."""
    if settings.fsdp_sharding != "optim_grads_params" or not layers:
        return 0
    unit = max(sum(layer_params(arch, i, sharding)) for i in layers)
    return int(unit * (2 * (FP8_WEIGHT_BYTES if settings.fp8_params else settings.weight_bytes) + settings.grad_bytes))


def _totals(terms: dict[str, int]) -> dict[str, int]:
    """``allocated`` (what torch.cuda.max_memory_allocated shows) and ``total`` (the device peak)."""
    terms["allocated"] = _peak(terms)
    terms["total"] = device_total(terms)
    return terms


def _train_fsdp(job: Job, arch: Architecture, layout, adapter) -> tuple[TrainMemory, TrainSettings]:
    """The FSDP actor's update peak on one device: the whole model sharded over the FSDP group.

    Each device holds 1/shard of every parameter (fsdp_size, or the world), its gradient and AdamW's
    moments; during forward and backward one decoder layer is gathered in bf16 (two with prefetch), or
    the whole model when reshard_after_forward is off. Ulysses SP splits each sequence's tokens over
    SP ranks (and the heads inside attention), so activations are those of tokens / SP.
    """
    dp = known(layout.dp(job.cluster.world), "DP (world / Ulysses SP)")
    shard = known(layout.shard(job.cluster.world), "FSDP shard group")
    if not dp or not shard:
        raise UnknownValue("the FSDP layout does not tile the world (see the VERL-FSDP findings); fix it first")
    settings = adapter.fsdp_train_settings(job, layout, dp)
    full = Sharding(1, 1, 1, 1)
    layers = tuple(range(arch.num_layers))
    whole = stage_params(arch, layers, 0, full)
    held = StageParams(*(-(-n // shard) for n in (whole.embedding, whole.dense, whole.expert, whole.output)))
    sp = known(layout.sp, "Ulysses SP")
    p = Parallel(tp=1, cp=sp)
    tokens, seq = settings.tokens_per_micro_batch, settings.sequence_length
    # a Hugging Face MoE block multiplies each expert's output by its routing weight, keeping the output for
    # backward (transformers' *SparseMoeBlock.forward): the combine input is kept
    hf = replace(settings.kernels, moe_probs_at_combine=True)
    per_layer = [layer_bytes(arch, i, tokens, seq, p, Recompute(), hf) for i in layers]
    if settings.checkpointing:
        acts = tokens / sp * 2 * arch.hidden * len(layers) + max(per_layer)  # inputs + one layer recomputed
    else:
        acts = sum(per_layer)
    unit = max(sum(layer_params(arch, i, full)) for i in layers) if layers else 0
    gathered = 2 * (whole.total if settings.gathered_between_passes else 2 * max(unit, whole.embedding))
    on_device = 0 if settings.host_resident else 1
    trained = held
    if settings.lora is not None:  # peft: the frozen base has no gradients and no optimizer state
        adapters = _trained(arch, layers, whole, full, settings)
        trained = StageParams(0, -(-adapters.total // shard), 0, 0)
        held = StageParams(held.embedding, held.dense + trained.dense, held.expert, held.output)
    terms = {
        "weights": held.total * settings.weight_bytes * on_device,
        "grads": trained.total * settings.grad_bytes * on_device,
        "optimizer": trained.total * settings.state_bytes * on_device,
        "optimizer_host": trained.total * settings.state_bytes * (1 - on_device),
        "gathered": gathered,
        "activations": int(acts),
        "logits": _logits(arch, tokens, 1, sp, settings),
        "ref_weights": 0,
    }
    terms["workspace"] = transient_bytes(arch, tokens, p, settings)
    row = StageMemory(0, [0], len(layers), held, _totals(terms), 1)
    return TrainMemory(
        [row], tokens, seq, terms["weights"] + terms["grads"] + terms["optimizer"], settings.batch_bound
    ), settings


def kv_bytes_per_token(arch: Architecture, tp: int, dtype_bytes: int = 2) -> tuple[int, bool]:
    """KV-cache bytes per token on one device of a rollout TP group, and whether KV heads are replicated.

    GQA: K and V of ``max(1, kv_heads / TP)`` heads per layer; vLLM replicates KV heads when TP exceeds
    them (vllm/model_executor/layers/linear.py ``QKVParallelLinear``: ``num_kv_head_replicas``).
    MLA: the latent ``kv_lora_rank + qk_rope_head_dim`` per layer on every TP rank (vLLM's MLA backends
    cache the compressed latent, not per-head K/V).
    Hybrid models: only the full-attention layers cache K/V per token; a Gated DeltaNet layer keeps a fixed
    recurrent state per request instead (``state_bytes_per_request``).
    """
    layers = arch.num_layers - len(arch.linear_layers)  # the Gated DeltaNet layers: state_bytes_per_request
    if arch.mla is not None:
        return layers * (arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim) * dtype_bytes, True
    heads = max(1, arch.kv_heads // tp)
    return 2 * layers * heads * arch.head_dim * dtype_bytes, tp > arch.kv_heads


def state_bytes_per_request(arch: Architecture, tp: int, dtype_bytes: int = 2) -> int:
    """The recurrent state of one request on one device of a TP group: per Gated DeltaNet layer the
    convolution's last ``kernel − 1`` inputs of q, k and v and the delta rule's state of value heads × value dim
    × key dim, in the model's dtype (vllm/model_executor/layers/mamba/mamba_utils.py
    ``gated_delta_net_state_shape``, ``mamba_cache_dtype`` / ``mamba_ssm_cache_dtype`` "auto", vLLM 0.24.0).
    vLLM pads each state to its KV page size, so this is a lower bound."""
    g = arch.linear
    if g is None or not arch.linear_layers:
        return 0
    conv = g.conv_channels // tp * (g.conv_kernel - 1)
    temporal = g.value_heads // tp * g.value_dim * g.key_dim
    return len(arch.linear_layers) * (conv + temporal) * dtype_bytes


def rollout_params(arch: Architecture, engine: str, tp: int, ep: int) -> StageParams:
    """The parameters on the busiest device of a rollout engine (TP ``tp``; experts over ``ep`` ranks, else
    split over TP); UnknownValue when the engine does not split the model so.

    vLLM spreads experts that do not divide over its EP ranks unevenly, the first ``E mod EP`` ranks taking
    one more (vllm 0.11.0, 0.12.0 fused_moe/layer.py and 0.24.0 fused_moe/expert_map_manager.py
    ``determine_expert_map``, linear placement, no EPLB; VLLM-EPLB judges EPLB's even split), so its busiest
    rank holds ``ceil(E / EP)`` experts — one when EP exceeds the routed experts (the other ranks hold none).
    Other engines are sized only where the experts divide.
    """
    sharding = Sharding(tp=tp, ep=ep, etp=1 if ep > 1 else tp, pp=1)
    uneven = engine == "vllm" and ep > 1 and arch.experts and arch.experts % ep
    _check_shards(arch, Sharding(tp, 1, sharding.etp, 1) if uneven else sharding, "rollout")
    params = stage_params(arch, tuple(range(arch.num_layers)), 0, sharding)
    if uneven:
        every = stage_params(arch, tuple(range(arch.num_layers)), 0, Sharding(tp, 1, 1, 1)).expert
        busiest = every // arch.experts * -(-arch.experts // ep)  # expert parameters are linear in the count
        params = StageParams(params.embedding, params.dense, busiest, params.output)
    return params


def _rollout(arch: Architecture, r: RolloutSettings, device: Device) -> RolloutMemory:
    weights = rollout_params(arch, r.engine, r.tp, r.ep).total * r.dtype_bytes
    per_token, replicated = kv_bytes_per_token(arch, r.tp, r.dtype_bytes)
    widest = max(
        2 * (arch.ffn or 0), 2 * arch.moe_ffn * max(arch.topk, 1), (arch.heads + 2 * arch.kv_heads) * arch.head_dim
    )
    # vLLM's profiling run: activations of max_num_batched_tokens tokens and the sampler's fp32 logits.
    reserve = (
        int(
            r.max_num_batched_tokens * 2 * (4 * arch.hidden + widest / r.tp)
            + (r.max_num_seqs or 256) * arch.vocab / r.tp * 4
        )
        + ROLLOUT_RESERVE_BYTES
    )
    if r.engine == "sglang":
        reserve = 0  # SGLang's mem_fraction_static already leaves out activations and CUDA graphs
    budget = int(r.memory_fraction * device.memory_bytes) - weights - reserve
    state = state_bytes_per_request(arch, r.tp, r.dtype_bytes)
    concurrent = max(0, budget) // (per_token * r.request_tokens + state) if r.request_tokens else 0
    per_replica = -(-r.requests_per_step // r.replicas) if r.requests_per_step and r.replicas else None
    return RolloutMemory(
        r.engine,
        r.tp,
        r.dp,
        r.ep,
        r.replicas,
        weights,
        per_token,
        budget,
        reserve,
        r.request_tokens,
        r.max_model_len,
        concurrent,
        r.max_num_seqs,
        per_replica,
        replicated,
        weights_exact=not arch.quantized,
        state_bytes_per_request=state,
    )


def _resident(train: TrainMemory, settings: TrainSettings) -> tuple[int, tuple[str, ...]]:
    """Training state left on the device while the rollout engine generates (after an update: Adam's moments
    exist), and its named parts."""
    b = max(train.stages, key=lambda s: s.total).bytes
    parts = {
        "weights and grads": 0 if settings.param_offload else b["weights"] + b["grads"],
        "optimizer": 0 if settings.optimizer_offload else b["optimizer"],
        "reference weights": b["ref_weights"],
        "critic": b.get("critic_state", 0),
    }
    return sum(parts.values()), tuple(f"{k} {v / GIB:.1f} GiB" for k, v in parts.items() if v)


def _built_state(b: dict[str, int], settings: TrainSettings, params: bool, optimizer: bool) -> int:
    """What a freshly built Megatron training engine holds on the device before its first step (its
    ``bytes`` terms; ``params`` / ``optimizer``: not offloaded).

    Megatron DDP allocates its gradient buffer and the (distributed) optimizer its fp32 master copy when
    they are built (megatron/core/distributed/param_and_grad_buffer.py, megatron/core/optimizer/
    distrib_optimizer.py); Adam's two moments appear at the first step (apex / Transformer Engine FusedAdam
    create their state lazily), so only the master's 4 of ``state_bytes`` bytes per parameter count.
    verl's engines move weights and grads (param_offload) and the optimizer (optimizer_offload) to the host
    at the end of their init (verl/workers/engine/megatron/transformer_impl.py, 0.9.1).
    """
    kept = b["weights"] + b["grads"] if params else 0
    if optimizer and settings.state_bytes and settings.optimizer_on_device:
        # Megatron's optimizer CPU offload: ``optimizer`` is the device's share; its master part is
        # ``master_on_device`` of the whole (frameworks/memory_settings.py hybrid_offload)
        whole = b["optimizer"] / settings.optimizer_on_device
        kept += int(whole * 4 * settings.master_on_device) // settings.state_bytes
    return kept


def _at_startup(train: TrainMemory, settings: TrainSettings, *, megatron: bool) -> tuple[int, tuple[str, ...]]:
    """Training state on one device when a colocated rollout engine starts, and its named parts.

    verl builds the critic, the reference and the actor before the rollout servers
    (verl/trainer/ppo/ray_trainer.py init_workers; verl/workers/engine_workers.py init_model, 0.9.1), each
    offloading at the end of its init what its param_offload / optimizer_offload say. Megatron: see
    ``_built_state``. FSDP: the sharded parameters only (gradients appear at the first backward, AdamW's
    state at the first step; verl/workers/engine/fsdp/transformer_impl.py). The largest device counts.
    """
    best, terms = 0, ()
    for s in train.stages:
        b = s.bytes
        parts = {}
        if megatron:
            parts["weights and grads"] = b["weights"] + b["grads"] if not settings.param_offload else 0
            parts["optimizer fp32 master"] = _built_state(b, settings, False, not settings.optimizer_offload)
        else:
            parts["weights"] = 0 if settings.param_offload else b["weights"]
        parts["reference weights"] = b["ref_weights"]
        parts["critic"] = s.critic_at_startup
        total = sum(parts.values())
        if total > best:
            best, terms = total, tuple(f"{k} {v / GIB:.1f} GiB" for k, v in parts.items() if v)
    return best, terms


def _host(job: Job, train: TrainMemory, settings: TrainSettings) -> HostMemory:
    b = max(train.stages, key=lambda s: s.total).bytes
    terms, moved = [], 0
    if settings.param_offload and settings.param_host_copy:
        moved += b["weights"] + b["grads"]
        terms.append(f"weights and grads ({settings.param_offload})")
    if settings.optimizer_offload:
        moved += b["optimizer"]
        terms.append(f"optimizer states ({settings.optimizer_offload})")
    if b["optimizer_host"]:
        moved += b["optimizer_host"]
        terms.append("optimizer_offload_fraction of the optimizer states (Megatron's optimizer CPU offload)")
    per_node = job.cluster.devices_per_node
    n = per_node.value if per_node.known else None
    return HostMemory(moved, n, moved * n if n else None, terms)
